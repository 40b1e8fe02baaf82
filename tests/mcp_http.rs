//! `ctxpack serve --http`: the bearer token, the hosts it answers, and the
//! session limit, checked with raw HTTP requests.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::World;

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(world: &World, args: &[&str]) -> Server {
        let vault = world.vault("vault", &[("a.md", "# A\n\nalpha\n")]);
        let mut child = world
            .cmd()
            .args(["serve", "--vault"])
            .arg(&vault)
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
