//! The stdio transport's front door: every line a client sends is checked
//! before the MCP service sees it, so a malformed or oversized message is
//! answered with a JSON-RPC error instead of being dropped in silence (which
//! would leave the client waiting for an answer that never comes).

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// JSON-RPC's "Parse error".
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's "Invalid Request".
const INVALID_REQUEST: i64 = -32600;
/// How far into an oversized message its `id` is looked for.
const ID_SEARCH_BYTES: usize = 4096;

/// Relays stdin to `server` and `server`'s output to stdout until the
/// server closes its side.
pub async fn relay(server: tokio::io::DuplexStream, max_message_bytes: usize) {
    let (from_server, to_server) = tokio::io::split(server);
    relay_between(
        tokio::io::stdin(),
        tokio::io::stdout(),
        from_server,
        to_server,
        max_message_bytes,
    )
    .await;
}

/// [`relay`] over any streams: `client_in` → checks → `to_server`, and
/// `from_server` → `client_out`, with the errors written between whole
/// lines.
pub async fn relay_between<CI, CO, SI, SO>(
    client_in: CI,
    mut client_out: CO,
    from_server: SI,
    mut to_server: SO,
    max_message_bytes: usize,
) where
    CI: AsyncRead + Unpin + Send + 'static,
    CO: AsyncWrite + Unpin,
    SI: AsyncRead + Unpin + Send + 'static,
    SO: AsyncWrite + Unpin + Send + 'static,
{
    let (lines, mut outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
    let errors = lines.clone();
    let inbound = tokio::spawn(async move {
        let mut reader = BufReader::new(client_in);
        loop {
            match read_bounded_line(&mut reader, max_message_bytes).await {
                Line::Eof => break,
                Line::Oversized { size, head } => {
                    let id = find_id(&head);
                    let message = format!(
                        "message of {size} bytes or more is over the limit of {max_message_bytes} bytes; dropped"
                    );
                    let _ = errors.send(error_line(id, INVALID_REQUEST, &message));
                }
                Line::Complete(line) => {
                    let text = trim_line_end(&line);
                    if text.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    if let Err(err) = serde_json::from_slice::<serde::de::IgnoredAny>(text) {
                        let message = format!("Parse error: {err}");
                        let _ = errors.send(error_line(None, PARSE_ERROR, &message));
                        continue;
                    }
                    if to_server.write_all(&line).await.is_err() {
                        break;
                    }
                    if !line.ends_with(b"\n") && to_server.write_all(b"\n").await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to_server.shutdown().await;
    });
    let outbound = tokio::spawn(async move {
        let mut reader = BufReader::new(from_server);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if lines.send(line.clone()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    // The server's answers and the relay's errors share stdout; the writer
    // stops when the server has closed and every error has been written.
    let mut server_done = Box::pin(outbound);
    let mut server_open = true;
    loop {
        tokio::select! {
            line = outgoing.recv() => match line {
                Some(line) => {
                    if client_out.write_all(&line).await.is_err() || client_out.flush().await.is_err() {
                        break;
                    }
                }
                None => break,
            },
            _ = &mut server_done, if server_open => {
                server_open = false;
                inbound.abort();
            }
        }
    }
}

enum Line {
    Complete(Vec<u8>),
    Oversized { size: usize, head: Vec<u8> },
    Eof,
}

/// One line of at most `max` bytes; a longer one is read to its end and
/// discarded, keeping its first bytes to find its `id`.
async fn read_bounded_line<R: AsyncRead + Unpin>(reader: &mut BufReader<R>, max: usize) -> Line {
    let mut line = Vec::new();
    let mut size = 0usize;
    let mut oversized = false;
    loop {
        let available = match reader.fill_buf().await {
            Ok(available) => available,
            Err(_) => return Line::Eof,
        };
        if available.is_empty() {
            return match (oversized, line.is_empty()) {
                (true, _) => Line::Oversized { size, head: line },
                (false, true) => Line::Eof,
                (false, false) => Line::Complete(line),
            };
        }
        let newline = memchr::memchr(b'\n', available);
        let take = newline.map_or(available.len(), |at| at + 1);
        size = size.saturating_add(take);
        if !oversized && size > max {
            oversized = true;
            line.truncate(ID_SEARCH_BYTES);
        }
        if oversized {
            let room = ID_SEARCH_BYTES.saturating_sub(line.len());
            line.extend_from_slice(&available[..take.min(room)]);
        } else {
            line.extend_from_slice(&available[..take]);
        }
        reader.consume(take);
        if newline.is_some() {
            return if oversized {
                Line::Oversized { size, head: line }
            } else {
                Line::Complete(line)
            };
        }
    }
}

fn trim_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The `"id"` of a message cut short: the first `"id":` followed by a
/// number or a string, so the client can match the error to its request.
fn find_id(head: &[u8]) -> Option<serde_json::Value> {
    let text = String::from_utf8_lossy(head);
    let mut rest = text.as_ref();
    while let Some(at) = rest.find("\"id\"") {
        rest = &rest[at + 4..];
        let Some(value) = rest.trim_start().strip_prefix(':') else {
            continue;
        };
        let mut stream =
            serde_json::Deserializer::from_str(value.trim_start()).into_iter::<serde_json::Value>();
        if let Some(Ok(id)) = stream.next()
            && (id.is_number() || id.is_string())
        {
            return Some(id);
        }
    }
    None
}

fn error_line(id: Option<serde_json::Value>, code: i64, message: &str) -> Vec<u8> {
    let value = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(serde_json::Value::Null),
        "error": { "code": code, "message": message },
    });
    let mut line = value.to_string().into_bytes();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_cut_messages_are_found() {
        assert_eq!(
            find_id(br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"x":"aaaa"#),
            Some(serde_json::json!(42))
        );
        assert_eq!(
            find_id(br#"{"params":{"query":"\"id\" is a word"},"id":"abc","#),
            Some(serde_json::json!("abc"))
        );
        assert_eq!(find_id(br#"{"jsonrpc":"2.0","method":"x","#), None);
    }

    #[tokio::test]
    async fn bad_lines_get_errors_and_good_ones_reach_the_server() {
        let (client, relay_client_side) = tokio::io::duplex(1 << 16);
        let (relay_server_side, server) = tokio::io::duplex(1 << 16);
        let (client_read, mut client_write) = tokio::io::split(client);
        let (relay_in, relay_out) = tokio::io::split(relay_client_side);
        let (from_server, to_server) = tokio::io::split(relay_server_side);
        let relay = tokio::spawn(relay_between(
            relay_in,
            relay_out,
            from_server,
            to_server,
            64,
        ));
        let (server_read, mut server_write) = tokio::io::split(server);

        let big = format!("{{\"id\":7,\"q\":\"{}\"}}\n", "x".repeat(100));
        client_write.write_all(b"not json\n").await.unwrap();
        client_write.write_all(big.as_bytes()).await.unwrap();
        client_write.write_all(b"{\"id\":1}\n").await.unwrap();
        client_write.shutdown().await.unwrap();

        let mut server_lines = BufReader::new(server_read).lines();
        assert_eq!(
            server_lines.next_line().await.unwrap().unwrap(),
            "{\"id\":1}"
        );
        server_write.write_all(b"{\"answer\":1}\n").await.unwrap();
        server_write.shutdown().await.unwrap();
        drop(server_write);
        drop(server_lines);

        let mut client_lines = BufReader::new(client_read).lines();
        let mut seen = Vec::new();
        while let Ok(Some(line)) = client_lines.next_line().await {
            seen.push(line);
            if seen.len() == 3 {
                break;
            }
        }
        relay.await.unwrap();
        assert!(
            seen.iter()
                .any(|l| l.contains("-32700") && l.contains("\"id\":null"))
        );
        assert!(
            seen.iter()
                .any(|l| l.contains("-32600") && l.contains("\"id\":7"))
        );
        assert!(seen.contains(&"{\"answer\":1}".to_string()));
    }
}
