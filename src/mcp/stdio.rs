//! The stdio transport's front door. Every line a client sends is checked
//! here before the MCP service (rmcp) sees it, and every answer passes back
//! through here, so each message gets what JSON-RPC 2.0 asks for:
//!
//! - a request gets exactly one answer carrying its id: the service's, or,
//!   when the service could not decode it, an error made here (rmcp drops
//!   some such lines in silence, answers others with `id: null`, and ends
//!   the whole session when the first message is not a request);
//! - a notification, or a response the server did not ask for, is never
//!   answered and never ends the session;
//! - requests are renamed with ids of the relay's own before the service
//!   sees them, and named back in the answers, so requests in flight that
//!   share an id are each answered (the service keys its bookkeeping by
//!   id, and would answer only one);
//! - at most [`MAX_UNANSWERED`] requests are read and not yet answered on
//!   stdout: past that the relay stops reading, so a client that stops
//!   reading its answers costs bounded memory (back-pressure), and gets
//!   every answer once it reads again.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// JSON-RPC's "Parse error".
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's "Invalid Request".
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's "Method not found".
const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's "Invalid params".
const INVALID_PARAMS: i64 = -32602;
/// The methods the server answers: a request for one of them that does
/// not decode has invalid params; for any other, the method is not found.
const SERVED_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
];
/// How far into an oversized message its `id` is looked for.
const ID_SEARCH_BYTES: usize = 4096;
/// Requests read but not yet answered on stdout, at most; the relay reads
/// no further line until one of their answers is written. Far above the
/// calls a server runs at once (8 by default), so a client that reads its
/// answers never waits on it.
pub(super) const MAX_UNANSWERED: usize = 64;
/// Lines queued for stdout, at most (each answer also holds one of the
/// [`MAX_UNANSWERED`] turns until it is written).
const QUEUED_LINES: usize = 16;

/// Relays stdin to `server` and `server`'s output to stdout until the
/// server closes its side.
pub(super) async fn relay(server: tokio::io::DuplexStream, max_message_bytes: usize) {
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

/// A request the service is answering: the id the client gave it, and the
/// turn it holds until its answer is written.
struct Pending {
    client_id: Value,
    method: String,
    turn: OwnedSemaphorePermit,
}

/// What the relay remembers between lines.
#[derive(Default)]
struct Book {
    /// The next id a request is renamed to.
    next_id: u64,
    /// Requests in flight, by the id the service knows them by.
    pending: HashMap<u64, Pending>,
    /// Requests the server sent the client, awaiting its response (by the
    /// id's JSON text); only these responses are passed on.
    server_requests: HashSet<String>,
    /// Whether the service has left its handshake: before that, rmcp ends
    /// the session on any message that is not a request.
    session_open: bool,
}

/// A line ready for stdout, with the turn it frees once written.
struct Outgoing {
    line: Vec<u8>,
    turn: Option<OwnedSemaphorePermit>,
}

/// What to do with one line from the client.
enum Decision {
    /// Nothing: a notification before the handshake, a stray response.
    Ignore,
    /// Answer it here with this error line.
    Answer(Vec<u8>),
    /// Pass these lines to the service (a notification, a response).
    Forward(Vec<Vec<u8>>),
    /// Pass this request to the service under `id`.
    Request {
        line: Vec<u8>,
        id: u64,
        client_id: Value,
        method: String,
    },
}

/// [`relay`] over any streams: `client_in` → checks → `to_server`, and
/// `from_server` → `client_out`, with the errors written between whole
/// lines.
pub(super) async fn relay_between<CI, CO, SI, SO>(
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
    let (lines, mut outgoing) = mpsc::channel::<Outgoing>(QUEUED_LINES);
    let errors = lines.clone();
    let book = Arc::new(Mutex::new(Book::default()));
    let turns = Arc::new(Semaphore::new(MAX_UNANSWERED));
    let inbound = {
        let book = Arc::clone(&book);
        let turns = Arc::clone(&turns);
        tokio::spawn(async move {
            let mut reader = BufReader::new(client_in);
            let mut turn: Option<OwnedSemaphorePermit> = None;
            loop {
                // A turn is taken before the line is read: with every turn
                // held by an unwritten answer, the client's lines wait in
                // its pipe.
                if turn.is_none() {
                    match Arc::clone(&turns).acquire_owned().await {
                        Ok(taken) => turn = Some(taken),
                        Err(_) => break,
                    }
                }
                let decision = match read_bounded_line(&mut reader, max_message_bytes).await {
                    Line::Eof => break,
                    Line::Oversized { size, head } => {
                        let message = format!(
                            "message of {size} bytes or more is over the limit of {max_message_bytes} bytes; dropped"
                        );
                        Decision::Answer(error_line(find_id(&head), INVALID_REQUEST, &message))
                    }
                    Line::Complete(line) => {
                        let text = trim_line_end(&line);
                        if text.iter().all(u8::is_ascii_whitespace) {
                            continue;
                        }
                        decide(text, &mut lock(&book))
                    }
                };
                let to_write = match decision {
                    Decision::Ignore => continue,
                    Decision::Answer(line) => {
                        let answer = Outgoing {
                            line,
                            turn: turn.take(),
                        };
                        if errors.send(answer).await.is_err() {
                            break;
                        }
                        continue;
                    }
                    Decision::Forward(lines) => lines,
                    Decision::Request {
                        line,
                        id,
                        client_id,
                        method,
                    } => {
                        // Booked before the service can answer it.
                        if let Some(taken) = turn.take() {
                            lock(&book).pending.insert(
                                id,
                                Pending {
                                    client_id,
                                    method,
                                    turn: taken,
                                },
                            );
                        }
                        vec![line]
                    }
                };
                for line in to_write {
                    if to_server.write_all(&line).await.is_err() {
                        return;
                    }
                }
            }
            // The client has said all it will: its requests in flight are
            // still answered (every turn back) before the service hears
            // the end of its input, which stops it.
            drop(turn);
            let _ = turns.acquire_many(MAX_UNANSWERED as u32).await;
            let _ = to_server.shutdown().await;
        })
    };
    let outbound = {
        let book = Arc::clone(&book);
        tokio::spawn(async move {
            let mut reader = BufReader::new(from_server);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let Some(out) = from_service(&line, &mut lock(&book)) else {
                            continue;
                        };
                        if lines.send(out).await.is_err() {
                            break;
                        }
                    }
                }
            }
        })
    };
    // The server's answers and the relay's errors share stdout; the writer
    // stops when the server has closed and every error has been written.
    let mut server_done = Box::pin(outbound);
    let mut server_open = true;
    loop {
        tokio::select! {
            out = outgoing.recv() => match out {
                Some(Outgoing { line, turn }) => {
                    if client_out.write_all(&line).await.is_err() || client_out.flush().await.is_err() {
                        break;
                    }
                    drop(turn);
                }
                None => break,
            },
            _ = &mut server_done, if server_open => {
                server_open = false;
                inbound.abort();
            }
        }
    }
    // Nobody reads the answers any more: the reader must not wait for them.
    turns.close();
}

fn lock(book: &Mutex<Book>) -> std::sync::MutexGuard<'_, Book> {
    book.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The top-level `id` of a message whose other parts may not decode (a
/// lone surrogate, a number out of range), read without decoding them.
#[derive(Deserialize)]
struct IdOnly {
    id: Option<Value>,
}

/// What to do with one complete line from the client.
fn decide(text: &[u8], book: &mut Book) -> Decision {
    let value = match serde_json::from_slice::<Value>(text) {
        Ok(value) => value,
        Err(err) => {
            // Valid JSON that cannot be held (a lone surrogate, a number
            // out of range) still names its id.
            if serde_json::from_slice::<serde::de::IgnoredAny>(text).is_ok() {
                let id = serde_json::from_slice::<IdOnly>(text)
                    .ok()
                    .and_then(|m| m.id)
                    .filter(is_echoable_id);
                return answer(
                    id,
                    INVALID_REQUEST,
                    &format!("the message cannot be decoded: {err}"),
                );
            }
            return answer(None, PARSE_ERROR, &format!("Parse error: {err}"));
        }
    };
    let Value::Object(mut message) = value else {
        let why = if value.is_array() {
            "batches are not supported: send one message per line"
        } else {
            "a message must be a JSON object"
        };
        return answer(None, INVALID_REQUEST, why);
    };
    let id = message.get("id").cloned();
    let is_response = message.contains_key("result") || message.contains_key("error");
    let version_ok = message.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
    let Some(method) = message.get("method").cloned() else {
        return match id {
            // A response (never answered): passed on only when the server
            // asked for it.
            Some(id) if is_response => {
                let asked = book.session_open && book.server_requests.remove(&id.to_string());
                match asked {
                    true => Decision::Forward(vec![line_of(&Value::Object(message))]),
                    false => Decision::Ignore,
                }
            }
            None if is_response => Decision::Ignore,
            id => answer(
                id.filter(is_echoable_id),
                INVALID_REQUEST,
                "a request needs a \"method\"",
            ),
        };
    };
    let Some(id) = id else {
        return notification(message, method, version_ok, book);
    };
    let echo = Some(id.clone()).filter(is_echoable_id);
    let Value::String(method) = method else {
        return answer(echo, INVALID_REQUEST, "\"method\" must be a string");
    };
    if !(id.is_string() || id.is_i64() || id.is_u64()) {
        return answer(
            echo,
            INVALID_REQUEST,
            "\"id\" must be a string or an integer",
        );
    }
    if !version_ok {
        return answer(echo, INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"");
    }
    if is_response {
        return answer(
            echo,
            INVALID_REQUEST,
            "a request has no \"result\" or \"error\"",
        );
    }
    let renamed = book.next_id;
    message.insert("id".into(), Value::from(renamed));
    let line = line_of(&Value::Object(message));
    let shown = crate::text::truncate_chars(&method, 80);
    let served = SERVED_METHODS.contains(&method.as_str());
    match serde_json::from_slice::<ClientJsonRpcMessage>(&line) {
        // A served method whose params fit none of its shapes decodes as a
        // custom request (rmcp's request types are tried in turn), which
        // the service would call unknown.
        Ok(ClientJsonRpcMessage::Request(request))
            if served && matches!(request.request, ClientRequest::CustomRequest(_)) =>
        {
            answer(echo, INVALID_PARAMS, &format!("invalid params for {shown}"))
        }
        Ok(ClientJsonRpcMessage::Request(_)) => {
            book.next_id += 1;
            // From here on the service is past its handshake (or has ended
            // the session on a failed one): it reads any message.
            if method == "initialize" {
                book.session_open = true;
            }
            Decision::Request {
                line,
                id: renamed,
                client_id: id,
                method,
            }
        }
        Ok(_) => answer(echo, INVALID_REQUEST, "not a request"),
        Err(_) if served => answer(echo, INVALID_PARAMS, &format!("invalid params for {shown}")),
        Err(_) => answer(
            echo,
            METHOD_NOT_FOUND,
            &format!("method not found: {shown}"),
        ),
    }
}

/// A notification: never answered. Passed on once the service reads
/// notifications and only when it can decode it (rmcp answers some it
/// cannot with an error, which a notification must never get).
fn notification(
    mut message: Map<String, Value>,
    method: Value,
    version_ok: bool,
    book: &mut Book,
) -> Decision {
    let Value::String(method) = method else {
        return answer(None, INVALID_REQUEST, "\"method\" must be a string");
    };
    if !version_ok {
        return answer(None, INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"");
    }
    if !book.session_open {
        return Decision::Ignore;
    }
    if method == "notifications/cancelled" {
        // A cancellation names the client's id: each request in flight
        // under it is cancelled under the id the service knows. The
        // service then sends no answer, so each turn is freed now.
        let Some(cancelled) = message
            .get("params")
            .and_then(|p| p.get("requestId"))
            .cloned()
        else {
            return Decision::Ignore;
        };
        let ids: Vec<u64> = book
            .pending
            .iter()
            .filter(|(_, p)| p.client_id == cancelled)
            .map(|(&id, _)| id)
            .collect();
        let mut lines = Vec::new();
        for id in ids {
            book.pending.remove(&id);
            if let Some(Value::Object(params)) = message.get_mut("params") {
                params.insert("requestId".into(), Value::from(id));
            }
            lines.push(line_of(&Value::Object(message.clone())));
        }
        return Decision::Forward(lines);
    }
    let line = line_of(&Value::Object(message));
    match serde_json::from_slice::<ClientJsonRpcMessage>(&line) {
        Ok(ClientJsonRpcMessage::Notification(_)) => Decision::Forward(vec![line]),
        _ => Decision::Ignore,
    }
}

/// The head of a line from the service: enough to route it.
#[derive(Deserialize)]
struct ServiceHead {
    id: Option<Value>,
    method: Option<serde::de::IgnoredAny>,
    error: Option<serde::de::IgnoredAny>,
}

/// A line from the service as the client must see it: an answer under the
/// client's id, with the turn it frees; `None` for the answer to a request
/// the client cancelled.
fn from_service(line: &[u8], book: &mut Book) -> Option<Outgoing> {
    let pass = |line: &[u8]| {
        Some(Outgoing {
            line: line.to_vec(),
            turn: None,
        })
    };
    let Ok(head) = serde_json::from_slice::<ServiceHead>(line) else {
        return pass(line);
    };
    match (head.id, head.method) {
        // A request of the server's own: its response will be passed on.
        (Some(id), Some(_)) => {
            book.server_requests.insert(id.to_string());
            pass(line)
        }
        (Some(Value::Number(id)), None) => {
            let id = id.as_u64()?;
            let pending = book.pending.remove(&id)?;
            // An answer from inside the session loop: notifications are
            // safe from here on (the lifecycle without `initialize`).
            if head.error.is_none()
                && !matches!(pending.method.as_str(), "ping" | "server/discover")
            {
                book.session_open = true;
            }
            Some(Outgoing {
                line: with_id(line, id, &pending.client_id),
                turn: Some(pending.turn),
            })
        }
        _ => pass(line),
    }
}

/// `line` (an answer under the relay's `id`) with the client's id instead.
fn with_id(line: &[u8], id: u64, client_id: &Value) -> Vec<u8> {
    // rmcp writes `jsonrpc` then `id` first: swap the id without touching
    // the rest of the bytes.
    let head = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},");
    if let Some(rest) = line.strip_prefix(head.as_bytes()) {
        let mut out = Vec::with_capacity(line.len() + 16);
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        out.extend_from_slice(client_id.to_string().as_bytes());
        out.push(b',');
        out.extend_from_slice(rest);
        return out;
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(mut answer)) => {
            answer.insert("id".into(), client_id.clone());
            line_of(&Value::Object(answer))
        }
        _ => line.to_vec(),
    }
}

/// An id an error may repeat: a string or a number (JSON-RPC's ids).
fn is_echoable_id(id: &Value) -> bool {
    id.is_string() || id.is_number()
}

fn answer(id: Option<Value>, code: i64, message: &str) -> Decision {
    Decision::Answer(error_line(id, code, message))
}

fn line_of(value: &Value) -> Vec<u8> {
    let mut line = value.to_string().into_bytes();
    line.push(b'\n');
    line
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

    /// A relay between a test client and a fake service that answers each
    /// request it gets with its own id and method; the service's lines are
    /// recorded.
    struct Rig {
        client_write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
        client_lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
        seen: mpsc::UnboundedReceiver<Value>,
    }

    fn rig(max_message_bytes: usize) -> Rig {
        let (client, relay_client_side) = tokio::io::duplex(1 << 16);
        let (relay_server_side, server) = tokio::io::duplex(1 << 16);
        let (client_read, client_write) = tokio::io::split(client);
        let (relay_in, relay_out) = tokio::io::split(relay_client_side);
        let (from_server, to_server) = tokio::io::split(relay_server_side);
        tokio::spawn(relay_between(
            relay_in,
            relay_out,
            from_server,
            to_server,
            max_message_bytes,
        ));
        let (server_read, mut server_write) = tokio::io::split(server);
        let (record, seen) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(server_read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let message: Value = serde_json::from_str(&line).unwrap();
                if let (Some(id), Some(method)) = (message.get("id"), message.get("method")) {
                    let answer = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {"method": method}});
                    let mut answer = answer.to_string();
                    answer.push('\n');
                    server_write.write_all(answer.as_bytes()).await.unwrap();
                }
                let _ = record.send(message);
            }
        });
        Rig {
            client_write,
            client_lines: BufReader::new(client_read).lines(),
            seen,
        }
    }

    impl Rig {
        async fn send(&mut self, line: &str) {
            self.client_write.write_all(line.as_bytes()).await.unwrap();
            self.client_write.write_all(b"\n").await.unwrap();
        }

        async fn receive(&mut self) -> Value {
            let line = self.client_lines.next_line().await.unwrap().unwrap();
            serde_json::from_str(&line).unwrap()
        }
    }

    const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

    #[tokio::test]
    async fn bad_lines_get_errors_with_their_ids_and_good_ones_reach_the_service() {
        let mut rig = rig(256);
        rig.send("not json").await;
        assert_eq!(
            rig.receive().await["error"]["code"],
            PARSE_ERROR,
            "a parse error"
        );
        let big = format!("{{\"id\":7,\"q\":\"{}\"}}", "x".repeat(300));
        rig.send(&big).await;
        let error = rig.receive().await;
        assert_eq!(
            (error["id"].clone(), error["error"]["code"].clone()),
            (serde_json::json!(7), serde_json::json!(INVALID_REQUEST))
        );
        for (line, id, code) in [
            (
                r#"{"jsonrpc":"2.0","id":1}"#,
                serde_json::json!(1),
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":"s","method":"ping","q":"\ud800"}"#,
                serde_json::json!("s"),
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":"x"}"#,
                serde_json::json!(2),
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}"#,
                serde_json::json!(3),
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":5}}"#,
                serde_json::json!("c"),
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":6,"method":"no/such","params":"x"}"#,
                serde_json::json!(6),
                METHOD_NOT_FOUND,
            ),
            (
                r#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#,
                serde_json::json!(4),
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                serde_json::json!(1.5),
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                Value::Null,
                INVALID_REQUEST,
            ),
            (
                r#"[{"jsonrpc":"2.0","id":5,"method":"ping"}]"#,
                Value::Null,
                INVALID_REQUEST,
            ),
        ] {
            rig.send(line).await;
            let error = rig.receive().await;
            assert_eq!(error["id"], id, "{line}: {error}");
            assert_eq!(error["error"]["code"], code, "{line}: {error}");
        }
        // Before the handshake, notifications and responses go nowhere.
        rig.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        rig.send(r#"{"jsonrpc":"2.0","id":9,"result":{}}"#).await;
        rig.send(INITIALIZE).await;
        let answer = rig.receive().await;
        assert_eq!(answer["id"], "init", "{answer}");
        assert_eq!(answer["result"]["method"], "initialize");
        let seen = rig.seen.recv().await.unwrap();
        assert_eq!(
            (seen["method"].clone(), seen["id"].clone()),
            (serde_json::json!("initialize"), serde_json::json!(0))
        );
        // After it, a notification the service can decode reaches it; a
        // stray response and an undecodable notification do not.
        rig.send(r#"{"jsonrpc":"2.0","id":9,"result":{}}"#).await;
        rig.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":"x"}"#)
            .await;
        rig.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        let seen = rig.seen.recv().await.unwrap();
        assert_eq!(
            seen,
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        );
        // An unknown method reaches the service, which answers it.
        rig.send(r#"{"jsonrpc":"2.0","id":"u","method":"no/such"}"#)
            .await;
        assert_eq!(rig.receive().await["id"], "u");
        assert_eq!(rig.seen.recv().await.unwrap()["method"], "no/such");
    }

    #[tokio::test]
    async fn requests_sharing_an_id_are_each_answered() {
        let mut rig = rig(1 << 20);
        rig.send(INITIALIZE).await;
        rig.receive().await;
        rig.send(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#)
            .await;
        rig.send(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#)
            .await;
        let mut methods = vec![rig.receive().await, rig.receive().await]
            .into_iter()
            .map(|answer| {
                assert_eq!(answer["id"], 7, "{answer}");
                answer["result"]["method"].as_str().unwrap().to_string()
            })
            .collect::<Vec<_>>();
        methods.sort();
        assert_eq!(methods, ["ping", "tools/list"]);
        let _ = rig.seen.recv().await;
        let (first, second) = (
            rig.seen.recv().await.unwrap(),
            rig.seen.recv().await.unwrap(),
        );
        assert_ne!(first["id"], second["id"], "the service sees two ids");
    }

    #[tokio::test]
    async fn a_client_that_does_not_read_stops_the_reading() {
        let (client, relay_client_side) = tokio::io::duplex(1 << 20);
        let (relay_server_side, server) = tokio::io::duplex(1 << 20);
        let (client_read, mut client_write) = tokio::io::split(client);
        let (relay_in, _) = tokio::io::split(relay_client_side);
        // The client's stdout holds 1 KB, and nobody reads it.
        let (relay_out, unread) = tokio::io::duplex(1024);
        let (from_server, to_server) = tokio::io::split(relay_server_side);
        tokio::spawn(relay_between(
            relay_in,
            relay_out,
            from_server,
            to_server,
            1 << 20,
        ));
        let (server_read, mut server_write) = tokio::io::split(server);
        let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&received);
        tokio::spawn(async move {
            let mut lines = BufReader::new(server_read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let message: Value = serde_json::from_str(&line).unwrap();
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let answer = format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"pad\":\"{}\"}}}}\n",
                    message["id"],
                    "p".repeat(200)
                );
                server_write.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        for i in 0..1000 {
            let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"ping\"}}\n");
            client_write.write_all(line.as_bytes()).await.unwrap();
        }
        // The relay reads its share of requests, then stops: whatever the
        // scheduling, never more than the unwritten answers allow (the
        // answers that fit in the 1 KB free a few turns).
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while received.load(std::sync::atomic::Ordering::SeqCst) < MAX_UNANSWERED
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let read = received.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            (MAX_UNANSWERED..=MAX_UNANSWERED + 8).contains(&read),
            "{read} requests read"
        );
        // Reading again, every answer arrives, in order of ids here.
        let mut lines = BufReader::new(unread).lines();
        for i in 0..1000 {
            let answer: Value =
                serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
            assert_eq!(answer["id"], i);
        }
        drop(client_read);
    }
}
