//! Load on `ctxpack serve --http` servers: CLIENTS threads, each its own
//! MCP session on one of the servers (round robin), each making CALLS tool
//! calls back to back; prints p50/p99 latency and throughput.
//!
//!     cargo run --release --example mcp_load -- URL[,URL...] CLIENTS CALLS TOOL [BUDGET]
//!
//! TOOL is `search` or `context_pack`; queries are the vault generator's
//! words. Raw HTTP/1.1 on std sockets, so the figures are the servers',
//! not a client library's.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const WORDS: &[&str] = &[
    "kalo mine",
    "vozi quasto",
    "derruru samon",
    "talmon linka",
    "stopra gor",
    "benqua sapra",
    "mine vozi",
    "quasto talmon",
    "linka benqua",
    "gor derruru",
];

/// One request on a fresh connection: the response's head and body.
fn post(address: &str, session: Option<&str>, body: &str, wanted: &str) -> String {
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(session) = session {
        request.push_str(&format!(
            "Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-06-18\r\n"
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    let mut buffer = [0u8; 65536];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => response.extend_from_slice(&buffer[..n]),
        }
        let text = String::from_utf8_lossy(&response);
        // The answer has arrived once its event is complete.
        if let Some(at) = text.find(wanted)
            && text[at..].contains("\n\n")
        {
            break;
        }
        if wanted.is_empty() && text.contains("\r\n\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&response).into_owned()
}

fn session(address: &str) -> String {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"load","version":"0"}}}"#;
    let response = post(address, None, init, r#""id":1"#);
    let id = response
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_string())
        })
        .expect("a session id");
    post(
        address,
        Some(&id),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "",
    );
    id
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: mcp_load URL[,URL...] CLIENTS CALLS search|context_pack [BUDGET]");
        std::process::exit(2);
    }
    let addresses: Vec<String> = args[0]
        .split(',')
        .map(|url| {
            url.trim_start_matches("http://")
                .trim_end_matches("/mcp")
                .to_string()
        })
        .collect();
    let clients: usize = args[1].parse().expect("CLIENTS");
    let calls: usize = args[2].parse().expect("CALLS");
    let tool = args[3].clone();
    let budget: usize = args.get(4).and_then(|b| b.parse().ok()).unwrap_or(8000);
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|client| {
            let address = addresses[client % addresses.len()].clone();
            let tool = tool.clone();
            std::thread::spawn(move || {
                let id = session(&address);
                let mut samples = Vec::with_capacity(calls);
                for call in 0..calls {
                    let query = WORDS[(client + call) % WORDS.len()];
                    let arguments = match tool.as_str() {
                        "search" => format!(r#"{{"query":"{query}","limit":10}}"#),
                        _ => format!(r#"{{"query":"{query}","budget":{budget}}}"#),
                    };
                    let body = format!(
                        r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#,
                        call + 2
                    );
                    let begin = Instant::now();
                    let response = post(&address, Some(&id), &body, &format!(r#""id":{}"#, call + 2));
                    samples.push(begin.elapsed());
                    assert!(
                        response.contains(r#""result""#) && !response.contains(r#""isError":true"#),
                        "{response}"
                    );
                }
                samples
            })
        })
        .collect();
    let mut samples: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("a client"))
        .collect();
    let wall = started.elapsed();
    samples.sort();
    let pick = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    println!(
        "{tool}: {} servers, {clients} clients, {} calls: p50 {:.1} ms, p99 {:.1} ms, {:.0} calls/s",
        addresses.len(),
        samples.len(),
        pick(0.5).as_secs_f64() * 1000.0,
        pick(0.99).as_secs_f64() * 1000.0,
        samples.len() as f64 / wall.as_secs_f64()
    );
}
