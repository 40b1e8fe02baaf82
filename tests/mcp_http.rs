//! `ctxpack serve --http`: the bearer token, the hosts it answers, and the
//! session limit, checked with raw HTTP requests.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::World;
use serde_json::{Value, json};

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(world: &World, args: &[&str]) -> Server {
        let vault = world.vault("vault", &[("a.md", "# A\n\nalpha\n")]);
        Server::start_over(world, &vault, args)
    }

    fn start_over(world: &World, vault: &std::path::Path, args: &[&str]) -> Server {
        let mut child = world
            .cmd()
            .args(["serve", "--vault"])
            .arg(vault)
            .arg("--index-dir")
            .arg(world.path().join("index"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let port = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "the server stopped"
            );
            if let Some(address) = line.trim().strip_prefix("ctxpack: serving MCP at http://") {
                let address = address.trim_end_matches("/mcp");
                break address.rsplit_once(':').unwrap().1.parse().unwrap();
            }
        };
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        Server { child, port }
    }

    /// POSTs an `initialize` with these `Host` and `Authorization` headers:
    /// the status code and the response's headers.
    fn initialize(&self, host: &str, authorization: Option<&str>) -> (u16, String) {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
        let mut request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        if let Some(authorization) = authorization {
            request.push_str(&format!("Authorization: {authorization}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = Vec::new();
        let mut buffer = [0u8; 4096];
        // The head is enough; an event stream may stay open.
        while !response.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => response.extend_from_slice(&buffer[..n]),
            }
        }
        let text = String::from_utf8_lossy(&response).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        (status, text)
    }
}

impl Server {
    /// POSTs the JSON-RPC `body` to `/mcp` (in `session` when given) over
    /// HTTP/1.0, so the answer ends with the connection: the status, the
    /// head, and the JSON-RPC messages of the answer (SSE `data:` lines or
    /// a JSON body).
    fn post(&self, session: Option<&str>, body: &str) -> (u16, String, Vec<Value>) {
        let mut request = format!(
            "POST /mcp HTTP/1.0\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n\
             Content-Length: {}\r\n",
            self.port,
            body.len()
        );
        if let Some(session) = session {
            request.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = Vec::new();
        let mut buffer = [0u8; 8192];
        loop {
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => response.extend_from_slice(&buffer[..n]),
            }
            // An answer's stream may stay open after its response.
            let text = String::from_utf8_lossy(&response);
            if let Some((_, body)) = text.split_once("\r\n\r\n")
                && messages(body).iter().any(|m| m.get("id").is_some())
            {
                break;
            }
        }
        let text = String::from_utf8_lossy(&response).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        (status, head.to_string(), messages(body))
    }

    /// Sends a DELETE for `session`: the status.
    fn delete(&self, session: Option<&str>) -> u16 {
        let mut request = format!(
            "DELETE /mcp HTTP/1.0\r\nHost: 127.0.0.1:{}\r\nMCP-Protocol-Version: 2025-06-18\r\n",
            self.port
        );
        if let Some(session) = session {
            request.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
        }
        request.push_str("\r\n");
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        String::from_utf8_lossy(&response)
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0)
    }

    /// Opens an MCP session: its id.
    fn open_session(&self) -> String {
        let (status, head, _) = self.post(
            None,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
        );
        assert_eq!(status, 200, "{head}");
        let session = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| value.trim().to_string())
            })
            .expect("a session id");
        let (status, head, _) = self.post(
            Some(&session),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        assert_eq!(status, 202, "{head}");
        session
    }

    /// Calls `method` in `session`: the response.
    fn request(&self, session: &str, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
        let (status, head, messages) = self.post(Some(session), &body.to_string());
        assert_eq!(status, 200, "{head}");
        messages
            .into_iter()
            .find(|m| m["id"] == 2)
            .expect("a response")
    }

    /// Calls tool `tool` in `session`: (is_error, the texts of its content).
    fn call(&self, session: &str, tool: &str, arguments: Value) -> (bool, Vec<String>) {
        let response = self.request(
            session,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        );
        let result = &response["result"];
        let texts = result["content"]
            .as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .map(|c| c["text"].as_str().unwrap_or_default().to_string())
            .collect();
        (result["isError"].as_bool().unwrap_or(false), texts)
    }
}

/// The JSON-RPC messages of an answer's body: SSE `data:` lines, or the
/// body itself.
fn messages(body: &str) -> Vec<Value> {
    let from_events: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect();
    if from_events.is_empty() {
        serde_json::from_str(body.trim()).into_iter().collect()
    } else {
        from_events
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn named_hosts_are_answered_with_the_token_and_others_refused() {
    let world = World::new();
    let server = Server::start(
        &world,
        &[
            "--http",
            "127.0.0.1:0",
            "--token",
            "s3cret",
            "--allowed-host",
            "wiki.example.org",
        ],
    );
    let port = server.port;
    let with_port = format!("wiki.example.org:{port}");
    assert_eq!(server.initialize(&with_port, Some("Bearer s3cret")).0, 200);
    // The scheme is case-insensitive (RFC 9110).
    assert_eq!(server.initialize(&with_port, Some("bearer s3cret")).0, 200);
    assert_eq!(server.initialize(&with_port, Some("BEARER s3cret")).0, 200);
    assert_eq!(
        server
            .initialize(&format!("127.0.0.1:{port}"), Some("Bearer s3cret"))
            .0,
        200
    );
    let (status, head) = server.initialize(&with_port, Some("Bearer wrong"));
    assert_eq!(status, 401, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{head}"
    );
    assert_eq!(server.initialize(&with_port, None).0, 401);
    assert_eq!(server.initialize(&with_port, Some("Basic s3cret")).0, 401);
    assert_eq!(
        server
            .initialize(&format!("evil.example:{port}"), Some("Bearer s3cret"))
            .0,
        403
    );
}

#[test]
fn every_address_of_the_machine_is_allowed_when_bound_to_all() {
    let world = World::new();
    let server = Server::start(&world, &["--http", "0.0.0.0:0", "--token", "t0k"]);
    let port = server.port;
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for host in [name.trim().to_ascii_lowercase(), "127.0.0.1".to_string()] {
        let (status, head) = server.initialize(&format!("{host}:{port}"), Some("Bearer t0k"));
        assert_eq!(status, 200, "{host}: {head}");
    }
    assert_eq!(
        server
            .initialize(&format!("attacker.example:{port}"), Some("Bearer t0k"))
            .0,
        403
    );
}

#[test]
fn sessions_past_the_limit_are_refused() {
    let world = World::new();
    let server = Server::start(&world, &["--http", "127.0.0.1:0", "--max-sessions", "1"]);
    let host = format!("127.0.0.1:{}", server.port);
    let (status, head) = server.initialize(&host, None);
    assert_eq!(status, 200, "{head}");
    assert!(
        head.to_ascii_lowercase().contains("mcp-session-id"),
        "{head}"
    );
    let (status, head) = server.initialize(&host, None);
    assert_eq!(status, 503, "{head}");
}

#[test]
fn blank_tokens_and_bad_hosts_are_usage_errors() {
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", "alpha\n")]);
    for args in [
        &["--http", "127.0.0.1:0", "--token", ""][..],
        &["--http", "0.0.0.0:0", "--token", "   "],
        &["--http", "127.0.0.1:0", "--allowed-host", "http://x/"],
        &["--http", "0.0.0.0:0"],
    ] {
        let output = world
            .cmd()
            .args(["serve", "--vault"])
            .arg(&vault)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
}

/// Many `initialize` requests at once never open more sessions than
/// `--max-sessions`: here each request's head arrives, then, a moment
/// later, all the bodies, which is when a check made on the head and a
/// session made on the body would part.
#[test]
fn the_session_limit_holds_under_concurrent_initializes() {
    const CLIENTS: usize = 60;
    let world = World::new();
    let server = Server::start(&world, &["--http", "127.0.0.1:0", "--max-sessions", "2"]);
    let port = server.port;
    let heads_sent = std::sync::Barrier::new(CLIENTS);
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..CLIENTS)
            .map(|_| {
                scope.spawn(|| {
                    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
                    let head = format!(
                        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
                         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
                         Connection: close\r\n\r\n",
                        body.len()
                    );
                    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
                    stream
                        .set_read_timeout(Some(Duration::from_secs(60)))
                        .unwrap();
                    stream.write_all(head.as_bytes()).unwrap();
                    heads_sent.wait();
                    std::thread::sleep(Duration::from_millis(300));
                    stream.write_all(body.as_bytes()).unwrap();
                    let mut response = Vec::new();
                    let mut buffer = [0u8; 4096];
                    while !response.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buffer) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => response.extend_from_slice(&buffer[..n]),
                        }
                    }
                    String::from_utf8_lossy(&response)
                        .split_whitespace()
                        .nth(1)
                        .and_then(|code| code.parse().ok())
                        .unwrap_or(0u16)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let opened = statuses.iter().filter(|&&s| s == 200).count();
    let refused = statuses.iter().filter(|&&s| s == 503).count();
    assert_eq!((opened, refused), (2, CLIENTS - 2), "{statuses:?}");
}

/// A pack handle is read only in the session that built it; another
/// session gets the answer an unknown handle gets.
#[test]
fn a_pack_handle_is_bound_to_its_session() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let server = Server::start_over(
        &world,
        &vault,
        &["--http", "127.0.0.1:0", "--max-result-tokens", "1000"],
    );
    let (mine, theirs) = (server.open_session(), server.open_session());
    let (is_error, texts) = server.call(
        &mine,
        "context_pack",
        json!({"query": "raft consensus", "budget_tokens": 6000}),
    );
    assert!(!is_error && texts.len() == 2, "{texts:?}");
    let note: Value = serde_json::from_str(&texts[1]).unwrap();
    let handle = note["pack_handle"].as_str().unwrap().to_string();
    let offset = note["next_offset"].as_u64().unwrap();

    let read = json!({"pack_handle": handle, "offset": offset});
    let grep = json!({"pack_handle": handle, "pattern": "(?i)raft"});
    let (is_error, part) = server.call(&mine, "read_pack", read.clone());
    assert!(!is_error && !part[0].is_empty(), "{part:?}");
    let (is_error, _) = server.call(&mine, "grep_pack", grep.clone());
    assert!(!is_error);
    let uri = format!("ctxpack://pack/{handle}");
    let resource = server.request(&mine, "resources/read", json!({"uri": uri}));
    assert!(
        resource["result"]["contents"][0]["text"].is_string(),
        "{resource}"
    );

    let unknown = "pack-1-0123456789abcdef";
    let as_unknown = |text: &str| text.replace(&handle, unknown);
    let (_, expected) = server.call(
        &theirs,
        "read_pack",
        json!({"pack_handle": unknown, "offset": offset}),
    );
    for (tool, arguments) in [("read_pack", read), ("grep_pack", grep)] {
        let (is_error, text) = server.call(&theirs, tool, arguments);
        assert!(is_error, "{tool}: {text:?}");
        assert_eq!(as_unknown(&text[0]), expected[0], "{tool}");
        assert!(expected[0].contains("unknown or expired"), "{expected:?}");
    }
    let refused = server.request(&theirs, "resources/read", json!({"uri": uri}));
    let never = server.request(
        &theirs,
        "resources/read",
        json!({"uri": format!("ctxpack://pack/{unknown}")}),
    );
    assert!(refused["result"].is_null(), "{refused}");
    assert_eq!(
        as_unknown(&refused["error"].to_string()),
        never["error"].to_string()
    );
}

/// A DELETE ends its session (204, as clients expect) and a session that
/// is not open is not found (404), where the transport answered 202 to both.
#[test]
fn a_delete_ends_the_session_it_names() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let server = Server::start_over(&world, &vault, &["--http", "127.0.0.1:0"]);
    let (mine, theirs) = (server.open_session(), server.open_session());
    assert_eq!(server.delete(Some("not-a-session")), 404);
    assert_eq!(server.delete(None), 400);
    assert_eq!(server.delete(Some(&mine)), 204);
    assert_eq!(server.delete(Some(&mine)), 404);
    let (status, head, _) = server.post(
        Some(&mine),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    );
    assert_eq!(status, 404, "{head}");
    // The other session goes on.
    let listed = server.request(&theirs, "tools/list", json!({}));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
}

/// The token can come from `CTXPACK_TOKEN`, kept out of the process list,
/// and the help says to prefer it.
#[test]
fn the_token_is_read_from_the_environment_and_the_help_recommends_it() {
    let world = World::new();
    let help = world.cmd().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let collapsed = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(collapsed.contains("Prefer CTXPACK_TOKEN"), "{help}");
    let vault = world.vault("vault", &[("a.md", "# A\n\nalpha\n")]);
    let mut child = world
        .cmd()
        .env("CTXPACK_TOKEN", "from-env")
        .args(["serve", "--http", "127.0.0.1:0", "--vault"])
        .arg(&vault)
        .arg("--index-dir")
        .arg(world.path().join("index"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let port: u16 = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the server stopped"
        );
        if let Some(address) = line.trim().strip_prefix("ctxpack: serving MCP at http://") {
            break address
                .trim_end_matches("/mcp")
                .rsplit_once(':')
                .unwrap()
                .1
                .parse()
                .unwrap();
        }
    };
    let server = Server { child, port };
    let host = format!("127.0.0.1:{port}");
    assert_eq!(server.initialize(&host, None).0, 401);
    assert_eq!(server.initialize(&host, Some("Bearer from-env")).0, 200);
}
