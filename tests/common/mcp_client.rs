//! A minimal MCP client over stdio, for driving `ctxpack serve`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};

use serde_json::{Value, json};

use super::World;

pub struct Client {
    pub child: Child,
    stdin: ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    next_id: u64,
    /// The server's answer to `initialize`.
    pub init: Value,
}

impl Client {
    pub fn start(world: &World, vault: &std::path::Path) -> Client {
        Client::start_with(world, vault, &[])
    }

    /// Starts `ctxpack serve` over `vault` with extra arguments.
    pub fn start_with(world: &World, vault: &std::path::Path, extra: &[&str]) -> Client {
        Client::start_env(world, vault, extra, &[])
    }

    /// Starts `ctxpack serve` over `vault` with its packs stamped at
    /// [`super::GENERATED_AT`], as [`World::pack`] stamps the CLI's.
    pub fn start_reproducible(world: &World, vault: &std::path::Path, extra: &[&str]) -> Client {
        Client::start_env(
            world,
            vault,
            extra,
            &[("SOURCE_DATE_EPOCH", super::GENERATED_EPOCH)],
        )
    }

    /// Starts `ctxpack serve` over `vault` with extra arguments and
    /// environment variables.
    pub fn start_env(
        world: &World,
        vault: &std::path::Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Client {
        let mut child = world
            .cmd()
            .envs(env.iter().copied())
            .args(["serve", "--vault"])
            .arg(vault)
            .arg("--index-dir")
            .arg(world.path().join("index"))
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        let mut client = Client {
            child,
            stdin,
            lines,
            next_id: 1,
            init: Value::Null,
        };
        let init = client.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "ctxpack");
        client.init = init;
        client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    /// Writes raw bytes to the server's stdin (a line that may be malformed).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message the server writes, if one comes within `timeout`.
    pub fn receive(&mut self, timeout: std::time::Duration) -> Option<Value> {
        let line = self.lines.recv_timeout(timeout).ok()?;
        Some(serde_json::from_str(&line).expect("JSON on stdout"))
    }

    pub fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("a response");
            let message: Value = serde_json::from_str(&line).expect("JSON on stdout");
            if message["id"] == id {
                return message;
            }
        }
    }

    /// Calls a tool: (is_error, text of the first content block). A
    /// protocol error (a tool the server does not offer) is an error too,
    /// with its message as the text.
    pub fn call(&mut self, tool: &str, arguments: Value) -> (bool, String) {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        if let Some(message) = response["error"]["message"].as_str() {
            return (true, message.to_string());
        }
        let result = &response["result"];
        (
            result["isError"].as_bool().unwrap_or(false),
            result["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
