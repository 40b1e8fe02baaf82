//! Models served by the user's own embedding server over the OpenAI
//! `/v1/embeddings` API (Ollama, LM Studio, llama.cpp's server, vLLM,
//! TEI). Registered with `ctxpack model add`, opt-in: nothing is ever
//! sent anywhere unless the user named the server.
//!
//! What leaves the machine is only what a local model would read: chunk
//! texts made from notes after `Policy::prepare` (private notes, comments,
//! private sections and secrets already gone), checked once more here by
//! the secret detector, and queries, checked the same way. The API key is
//! read from the environment when the model is loaded and kept in memory:
//! the manifest names only the variable, and any text a server sends back
//! has the key replaced before it reaches a message.
//!
//! A server can fail or be slow where a local model cannot, so the calls
//! are fallible (`Embedder::try_embed_many`, `try_embed_query`): requests
//! of [`REQUEST_TEXTS`] texts, [`CONCURRENCY`] at a time, each bounded by
//! the model's timeout and retried with backoff when the failure may pass;
//! after a failed call the server is not asked again for [`PAUSE`], so a
//! search with the server down costs nothing and says why.

use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper::Uri;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue};
use serde::{Deserialize, Serialize};

use super::{Embedder, Manifest, ModelError};
use crate::retrieve::fusion::Fusion;

/// The manifest's `kind` of a remote model.
pub(crate) const KIND: &str = "remote";

/// Texts sent in one request: small enough that a CPU server answers one
/// well within its timeout, large enough that the request overhead is
/// small beside the model's work.
pub(crate) const REQUEST_TEXTS: usize = 16;
/// Requests in flight at once for one call: a GPU server batches them; a
/// CPU one queues them, and the bound keeps that queue short.
pub(crate) const CONCURRENCY: usize = 4;
/// Tries per request when the failure may pass (no connection, a timeout,
/// 408, 429, 5xx); the waits between them double from [`BACKOFF`].
pub(crate) const ATTEMPTS: u32 = 3;
pub(crate) const BACKOFF: Duration = Duration::from_millis(250);
/// One request's timeout unless `model add --timeout-ms` says otherwise.
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// A query is embedded while someone waits for a search: the whole call,
/// retries included, gets at most this long before the search goes on
/// without the semantic arm ([`query_deadline`] reads an override).
const QUERY_DEADLINE: Duration = Duration::from_secs(5);
/// Overrides [`QUERY_DEADLINE`], in milliseconds (100 to 600,000): for a
/// server known to be slow to answer, such as a large model on a CPU.
pub(crate) const QUERY_WAIT_VAR: &str = "CTXPACK_QUERY_WAIT_MS";

/// How long a search waits for a served model, in all.
pub(crate) fn query_deadline() -> Duration {
    std::env::var(QUERY_WAIT_VAR)
        .ok()
        .and_then(|ms| ms.trim().parse::<u64>().ok())
        .map_or(QUERY_DEADLINE, |ms| {
            Duration::from_millis(ms.clamp(100, 600_000))
        })
}
/// After a failed call, later calls fail at once with its reason for this
/// long, so one search or index run does not wait on a dead server twice.
pub(crate) const PAUSE: Duration = Duration::from_secs(30);
/// Each text is cut to this many bytes (the local e5 model's cut), so a
/// huge note cannot make a huge request.
pub(crate) const MAX_TEXT_BYTES: usize = 256 << 10;
/// The most dimensions a served model may have.
pub(crate) const MAX_DIMS: usize = 16_384;
/// Bytes of a response read per vector it must hold (a JSON float is at
/// most ~25 bytes) and besides them; anything longer is refused unread,
/// so a hostile server cannot exhaust memory.
const BYTES_PER_FLOAT: usize = 32;
const RESPONSE_SLACK: usize = 64 << 10;
/// Characters of a server's error message shown in ours.
const SHOWN_ERROR_CHARS: usize = 200;
/// The text embedded when a model is added, to check it answers and learn
/// its dimension.
const PROBE: &str = "ctxpack checks this model: 检查模型";

/// What the model store keeps of a remote model. Never the key itself:
/// only the name of the environment variable that holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// The `/v1/embeddings` URL requests are posted to.
    pub url: String,
    /// The model's name on the server.
    pub model: String,
    /// The variable holding the API key, sent as `Authorization: Bearer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Put before every query (e.g. e5's `query: `).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub query_prefix: String,
    /// Put before every passage (e.g. e5's `passage: `).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub passage_prefix: String,
    /// One request's timeout, in milliseconds.
    pub timeout_ms: u64,
}

/// Where requests go, checked: https anywhere, plain http only to this
/// machine (a key or a note's text never crosses a network in clear).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Target {
    tls: bool,
    host: String,
    port: u16,
    /// What the `Host` header says.
    authority: String,
    path: String,
}

/// The `/v1/embeddings` URL a user's `--endpoint` means: a server's base
/// (`http://127.0.0.1:11434`), its `/v1`, or the full path.
pub(crate) fn embeddings_url(endpoint: &str) -> Result<String, ModelError> {
    let target = parse_target(endpoint)?;
    let path = target.path.trim_end_matches('/');
    let path = if path.ends_with("/embeddings") {
        path.to_string()
    } else if path.is_empty() {
        "/v1/embeddings".to_string()
    } else {
        format!("{path}/embeddings")
    };
    let scheme = if target.tls { "https" } else { "http" };
    Ok(format!("{scheme}://{}{path}", target.authority))
}

fn parse_target(url: &str) -> Result<Target, ModelError> {
    let bad = |why: &str| ModelError::Remote(format!("the endpoint '{url}' {why}"));
    let uri: Uri = url
        .parse()
        .map_err(|err| bad(&format!("is not a URL: {err}")))?;
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(bad("must start with http:// or https://")),
    };
    let authority = uri.authority().ok_or_else(|| bad("names no host"))?;
    // Credentials belong in the environment (`--api-key-env`), never in a
    // URL the model store keeps.
    if authority.as_str().contains('@') {
        return Err(bad(
            "holds credentials; pass the key with --api-key-env instead",
        ));
    }
    if uri.query().is_some() {
        return Err(bad("has a query string, which ctxpack does not send"));
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    if host.is_empty() {
        return Err(bad("names no host"));
    }
    if !tls && !is_loopback(&host) {
        return Err(bad(
            "is plain http to another machine: use https, or a server on 127.0.0.1",
        ));
    }
    Ok(Target {
        tls,
        port: authority.port_u16().unwrap_or(if tls { 443 } else { 80 }),
        authority: authority.as_str().to_string(),
        path: uri.path().to_string(),
        host,
    })
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Why a request failed, and whether trying again may help.
enum Failure {
    Retry(String),
    Final(String),
}

/// What every request of one model shares (moved into the runtime's tasks).
struct Client {
    target: Target,
    url: String,
    model: String,
    /// `Bearer <key>`, marked sensitive so hyper never shows it.
    authorization: Option<HeaderValue>,
    key: Option<String>,
    timeout: Duration,
    tls: Option<tokio_rustls::TlsConnector>,
    /// What every vector must have (`None` while probing for it).
    dims: Option<usize>,
}

/// A model on an embedding server, as the semantic arm sees any model.
pub(crate) struct RemoteModel {
    pub manifest: Manifest,
    client: Arc<Client>,
    query_prefix: String,
    passage_prefix: String,
    /// When and why the last call failed (see [`PAUSE`]).
    failed: Mutex<Option<(Instant, String)>>,
}

impl RemoteModel {
    /// The model `manifest` describes, with its key read from the
    /// environment now.
    pub(crate) fn open(manifest: Manifest) -> Result<RemoteModel, ModelError> {
        let endpoint = manifest.endpoint.clone().ok_or_else(|| {
            ModelError::Invalid("a remote model's manifest has no endpoint".into())
        })?;
        let client = Client::new(&endpoint, Some(manifest.dims))?;
        Ok(RemoteModel {
            manifest,
            client: Arc::new(client),
            query_prefix: endpoint.query_prefix,
            passage_prefix: endpoint.passage_prefix,
            failed: Mutex::new(None),
        })
    }

    /// Embeds `texts` (already prefixed and checked), at most `deadline`
    /// for the whole call when given.
    fn call(
        &self,
        texts: Vec<String>,
        deadline: Option<Duration>,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        if let Some((at, why)) = self.failed.lock().map(|f| f.clone()).unwrap_or_default()
            && at.elapsed() < PAUSE
        {
            return Err(ModelError::Remote(format!(
                "{why} (not asked again for {} s)",
                PAUSE.saturating_sub(at.elapsed()).as_secs().max(1)
            )));
        }
        let client = Arc::clone(&self.client);
        let answered = block(async move {
            Ok(match deadline {
                Some(limit) => {
                    let url = client.url.clone();
                    match tokio::time::timeout(limit, client.embed_all(texts)).await {
                        Ok(result) => (result, false),
                        Err(_) => (
                            Err(ModelError::Remote(format!(
                                "{url}: no answer within {} ms",
                                limit.as_millis()
                            ))),
                            true,
                        ),
                    }
                }
                None => (client.embed_all(texts).await, false),
            })
        });
        let (result, cut_short) = answered.unwrap_or_else(|why| (Err(why), false));
        // A bound shorter than a query's is ctxpack's own (a few chunks on
        // the fly): running out of it says nothing of the server, which
        // must not then be skipped for the next 30 s.
        let own_bound = cut_short && deadline.is_some_and(|limit| limit < query_deadline());
        if let (Err(why), Ok(mut failed), false) = (&result, self.failed.lock(), own_bound) {
            *failed = Some((Instant::now(), why.to_string()));
        }
        result
    }

    fn prepared(&self, texts: &[&str], prefix: &str) -> Vec<String> {
        texts.iter().map(|text| outgoing(text, prefix)).collect()
    }
}

/// The text sent for `text`: cut to [`MAX_TEXT_BYTES`], every secret the
/// detector finds replaced (a last check: chunk texts come from notes the
/// privacy policy already prepared, and a query comes from the user),
/// then prefixed.
pub(crate) fn outgoing(text: &str, prefix: &str) -> String {
    let mut end = text.len().min(MAX_TEXT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let options = crate::privacy::secrets::DetectorOptions {
        personal_data: false,
    };
    let (redacted, _) = crate::privacy::secrets::redact(&text[..end], &options);
    format!("{prefix}{redacted}")
}

impl Embedder for RemoteModel {
    fn name(&self) -> &str {
        &self.manifest.name
    }

    fn fingerprint(&self) -> &str {
        &self.manifest.fingerprint
    }

    fn dims(&self) -> usize {
        self.manifest.dims
    }

    /// A served model is a sentence-transformer of BERT's family or a
    /// larger one; the measured default of that family (MiniLM: score
    /// fusion at 0.5) is the nearest known, and `--weight` / `--fusion`
    /// change it.
    fn default_weight(&self) -> f64 {
        super::BERT_SEMANTIC_WEIGHT
    }

    fn default_fusion(&self) -> Fusion {
        Fusion::Score
    }

    /// A text the server does not embed gets a zero vector, which matches
    /// nothing; whatever caches vectors calls `try_embed_many` instead.
    fn embed(&self, text: &str) -> Vec<f32> {
        self.try_embed_many(&[text])
            .ok()
            .and_then(|mut v| v.pop())
            .unwrap_or_else(|| vec![0.0; self.dims()])
    }

    fn embed_query(&self, text: &str) -> Vec<f32> {
        self.try_embed_query(text)
            .unwrap_or_else(|_| vec![0.0; self.dims()])
    }

    fn embed_many(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        self.try_embed_many(texts)
            .unwrap_or_else(|_| vec![vec![0.0; self.dims()]; texts.len()])
    }

    fn try_embed_many(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.call(self.prepared(texts, &self.passage_prefix), None)
    }

    fn try_embed_many_within(
        &self,
        texts: &[&str],
        deadline: Duration,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        self.call(self.prepared(texts, &self.passage_prefix), Some(deadline))
    }

    fn try_embed_query(&self, text: &str) -> Result<Vec<f32>, ModelError> {
        let mut vectors = self.call(
            self.prepared(&[text], &self.query_prefix),
            Some(query_deadline()),
        )?;
        vectors
            .pop()
            .ok_or_else(|| ModelError::Remote("the server sent no vector".into()))
    }
}

/// Checks that `endpoint` answers with vectors (of `dims` dimensions when
/// given) and returns their dimension: what `model add` stores.
pub(crate) fn probe(endpoint: &Endpoint, dims: Option<usize>) -> Result<usize, ModelError> {
    let client = Arc::new(Client::new(endpoint, dims)?);
    let text = outgoing(PROBE, &endpoint.passage_prefix);
    // The client checks the dimension against `dims` when given.
    let vectors = block(async move { client.embed_all(vec![text]).await })?;
    Ok(vectors.first().map_or(0, Vec::len))
}

impl Client {
    /// `dims`: what every vector must have (`None` when probing for it).
    fn new(endpoint: &Endpoint, dims: Option<usize>) -> Result<Client, ModelError> {
        let target = parse_target(&endpoint.url)?;
        let key = match &endpoint.api_key_env {
            None => None,
            Some(var) => Some(
                std::env::var(var)
                    .ok()
                    .filter(|key| !key.is_empty())
                    .ok_or_else(|| {
                        ModelError::Remote(format!("the API key variable {var} is not set"))
                    })?,
            ),
        };
        let authorization = match &key {
            None => None,
            Some(key) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                    ModelError::Remote(format!(
                        "the API key in {} holds characters an HTTP header cannot carry",
                        endpoint.api_key_env.as_deref().unwrap_or_default()
                    ))
                })?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        if dims.is_some_and(|d| d == 0 || d > MAX_DIMS) {
            return Err(ModelError::Remote(format!(
                "a model has 1 to {MAX_DIMS} dimensions"
            )));
        }
        let tls = target.tls.then(tls_connector).transpose()?;
        Ok(Client {
            url: endpoint.url.clone(),
            target,
            model: endpoint.model.clone(),
            authorization,
            key,
            timeout: Duration::from_millis(endpoint.timeout_ms.max(1)),
            tls,
            dims,
        })
    }

    /// `text` with the key replaced, for a message built from what the
    /// server sent (a server may echo the header it was given).
    fn scrub(&self, text: &str) -> String {
        match &self.key {
            Some(key) => text.replace(key.as_str(), "[API key]"),
            None => text.to_string(),
        }
    }

    /// Every text's vector, in order: requests of [`REQUEST_TEXTS`],
    /// [`CONCURRENCY`] at once; the first failure ends the call.
    async fn embed_all(self: Arc<Self>, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        let groups: Vec<Vec<String>> = texts
            .chunks(REQUEST_TEXTS)
            .map(<[String]>::to_vec)
            .collect();
        let count = groups.len();
        let mut results: Vec<Option<Vec<Vec<f32>>>> = vec![None; count];
        let mut pending = groups.into_iter().enumerate();
        let mut running = tokio::task::JoinSet::new();
        loop {
            while running.len() < CONCURRENCY {
                let Some((at, group)) = pending.next() else {
                    break;
                };
                let client = Arc::clone(&self);
                running.spawn(async move { (at, client.request_with_retries(group).await) });
            }
            let Some(joined) = running.join_next().await else {
                break;
            };
            let (at, vectors) = joined
                .map_err(|err| ModelError::Remote(format!("an embedding request failed: {err}")))?;
            results[at] = Some(vectors?);
        }
        Ok(results.into_iter().flatten().flatten().collect())
    }

    async fn request_with_retries(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        let mut wait = BACKOFF;
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            let outcome = match tokio::time::timeout(self.timeout, self.request(&texts)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(Failure::Retry(format!(
                    "no answer within {} ms",
                    self.timeout.as_millis()
                ))),
            };
            match outcome {
                Ok(vectors) => return Ok(vectors),
                Err(Failure::Final(why)) => {
                    return Err(ModelError::Remote(format!("{}: {why}", self.url)));
                }
                Err(Failure::Retry(why)) => last = why,
            }
            if attempt < ATTEMPTS {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
        Err(ModelError::Remote(format!(
            "{}: {last} ({ATTEMPTS} attempts)",
            self.url
        )))
    }

    /// One POST of `texts`, its answer read and checked.
    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Failure> {
        let body = serde_json::json!({
            "model": self.model,
            "input": texts,
            "encoding_format": "float",
        });
        let body = serde_json::to_vec(&body).map_err(|err| Failure::Final(err.to_string()))?;
        let mut request = hyper::Request::post(self.target.path.as_str())
            .header(HOST, self.target.authority.as_str())
            .header(CONTENT_TYPE, "application/json");
        if let Some(value) = &self.authorization {
            request = request.header(AUTHORIZATION, value.clone());
        }
        let request = request
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .map_err(|err| Failure::Final(format!("cannot build the request: {err}")))?;
        let connect = |err: std::io::Error| Failure::Retry(format!("cannot connect: {err}"));
        let stream = tokio::net::TcpStream::connect((self.target.host.as_str(), self.target.port))
            .await
            .map_err(connect)?;
        let _ = stream.set_nodelay(true);
        // Vectors take `dims` floats each; an unknown dimension (the probe)
        // is bounded by the largest allowed.
        let limit = RESPONSE_SLACK + texts.len() * self.dims.unwrap_or(MAX_DIMS) * BYTES_PER_FLOAT;
        let (status, bytes) = match &self.tls {
            None => send(hyper_util::rt::TokioIo::new(stream), request, limit).await?,
            Some(connector) => {
                let name = rustls::pki_types::ServerName::try_from(self.target.host.clone())
                    .map_err(|err| Failure::Final(format!("bad host name: {err}")))?;
                let stream = connector
                    .connect(name, stream)
                    .await
                    .map_err(|err| Failure::Retry(format!("TLS failed: {err}")))?;
                send(hyper_util::rt::TokioIo::new(stream), request, limit).await?
            }
        };
        if !status.is_success() {
            let message = self.scrub(&error_message(&bytes));
            let why = if status.is_redirection() {
                format!("answered {status}; redirects are not followed")
            } else {
                format!("answered {status}: {message}")
            };
            return Err(
                if status.is_server_error() || status.as_u16() == 429 || status.as_u16() == 408 {
                    Failure::Retry(why)
                } else {
                    Failure::Final(why)
                },
            );
        }
        parse_vectors(&bytes, texts.len(), self.dims)
            .map_err(|why| Failure::Final(self.scrub(&why.to_string())))
    }
}

/// Sends `request` over `io` (HTTP/1.1, no redirect followed) and reads at
/// most `limit` bytes of the answer.
async fn send<I>(
    io: I,
    request: hyper::Request<http_body_util::Full<bytes::Bytes>>,
    limit: usize,
) -> Result<(hyper::StatusCode, Vec<u8>), Failure>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|err| Failure::Retry(format!("HTTP failed: {err}")))?;
    // The connection is driven beside the request and ends with it.
    let driver = tokio::spawn(connection);
    let response = sender
        .send_request(request)
        .await
        .map_err(|err| Failure::Retry(format!("no answer: {err}")))?;
    let status = response.status();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| Failure::Retry(format!("the answer broke off: {err}")))?;
        if let Some(data) = frame.data_ref() {
            if bytes.len() + data.len() > limit {
                driver.abort();
                return Err(Failure::Final(format!(
                    "the answer is larger than the {limit} bytes read of it"
                )));
            }
            bytes.extend_from_slice(data);
        }
    }
    drop(sender);
    driver.abort();
    Ok((status, bytes))
}

/// What a failed answer says: the OpenAI error shape's message, else the
/// start of its text, one line.
fn error_message(bytes: &[u8]) -> String {
    let text = serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| {
            let error = &v["error"];
            error["message"]
                .as_str()
                .or_else(|| error.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(bytes).into_owned());
    let mut shown: String = text
        .chars()
        .take(SHOWN_ERROR_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() > SHOWN_ERROR_CHARS {
        shown.push('…');
    }
    shown.trim().to_string()
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<usize>,
    /// Read as f64: a server sends f32 values written with f64 precision
    /// (Python), and reading those as f64 then rounding gives the f32 the
    /// server had, exactly.
    embedding: Vec<f64>,
}

/// The `count` vectors an answer holds, in input order, checked: as many
/// as asked, each index once, `dims` finite numbers each (any dimension up
/// to [`MAX_DIMS`] when `None`, the same for all), made unit length when
/// the server did not.
fn parse_vectors(
    bytes: &[u8],
    count: usize,
    dims: Option<usize>,
) -> Result<Vec<Vec<f32>>, ModelError> {
    let wrong = ModelError::Remote;
    let answer: Answer = serde_json::from_slice(bytes)
        .map_err(|err| wrong(format!("the answer is not an embeddings list: {err}")))?;
    if answer.data.len() != count {
        return Err(wrong(format!(
            "the answer holds {} vectors for {count} texts",
            answer.data.len()
        )));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; count];
    let width = dims.or_else(|| answer.data.first().map(|item| item.embedding.len()));
    for (position, item) in answer.data.into_iter().enumerate() {
        let at = item.index.unwrap_or(position);
        let slot = slots
            .get_mut(at)
            .ok_or_else(|| wrong(format!("the answer has a vector for index {at} of {count}")))?;
        if slot.is_some() {
            return Err(wrong(format!("the answer has two vectors for index {at}")));
        }
        let len = item.embedding.len();
        if Some(len) != width || len == 0 || len > MAX_DIMS {
            return Err(wrong(format!(
                "the answer has a vector of {len} dimensions, not {}",
                width.unwrap_or(0)
            )));
        }
        let vector: Vec<f32> = item.embedding.iter().map(|&x| x as f32).collect();
        if vector.iter().any(|x| !x.is_finite()) {
            return Err(wrong(
                "the answer has a number that is not finite as f32".into(),
            ));
        }
        *slot = Some(unit(vector));
    }
    Ok(slots.into_iter().flatten().collect())
}

/// `vector` at unit length. One already so (up to rounding) is kept bit
/// for bit, so a server's vectors equal the local model's it serves.
fn unit(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 && (norm - 1.0).abs() > 1e-4 {
        for x in &mut vector {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
    vector
}

/// The fingerprint of a served model: what decides its vectors (where,
/// which model, the prefixes), so changing any re-embeds; the key and the
/// timeout do not.
pub(crate) fn fingerprint(endpoint: &Endpoint, dims: usize) -> String {
    let mut hasher = blake3::Hasher::new();
    for part in [
        KIND,
        endpoint.url.as_str(),
        endpoint.model.as_str(),
        &dims.to_string(),
        endpoint.query_prefix.as_str(),
        endpoint.passage_prefix.as_str(),
    ] {
        hasher.update(part.as_bytes());
        hasher.update(&[0]);
    }
    hasher.finalize().to_hex()[..16].to_string()
}

/// The runtime requests run on. Embedding is called from rayon threads
/// and a server's blocking pool, where a tokio `block_on` may panic; a
/// call is spawned here and waited for on a plain channel instead.
fn runtime() -> Result<&'static tokio::runtime::Runtime, ModelError> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, ModelError>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("ctxpack-embed")
                .enable_all()
                .build()
                .map_err(|err| {
                    ModelError::Remote(format!("cannot start the embedding client: {err}"))
                })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Runs `future` on the client's runtime and waits for it on this thread.
fn block<T: Send + 'static>(
    future: impl Future<Output = Result<T, ModelError>> + Send + 'static,
) -> Result<T, ModelError> {
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    runtime()?.spawn(async move {
        let _ = sender.send(future.await);
    });
    receiver.recv().unwrap_or_else(|_| {
        Err(ModelError::Remote(
            "the embedding request was abandoned".into(),
        ))
    })
}

/// rustls with the web's root certificates (as the PostgreSQL store's),
/// speaking HTTP/1.1 only.
fn tls_connector() -> Result<tokio_rustls::TlsConnector, ModelError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| ModelError::Remote(format!("TLS: {err}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_https_or_this_machine_and_mean_the_embeddings_path() {
        let cases = [
            (
                "http://127.0.0.1:11434",
                "http://127.0.0.1:11434/v1/embeddings",
            ),
            (
                "http://localhost:1234/v1",
                "http://localhost:1234/v1/embeddings",
            ),
            ("http://[::1]:8080/v1/", "http://[::1]:8080/v1/embeddings"),
            (
                "https://api.example.com/v1/embeddings",
                "https://api.example.com/v1/embeddings",
            ),
            (
                "https://gpu.lan/proxy/openai",
                "https://gpu.lan/proxy/openai/embeddings",
            ),
        ];
        for (given, expected) in cases {
            assert_eq!(embeddings_url(given).as_deref(), Ok(expected), "{given}");
        }
        let refused = [
            (
                "http://192.168.1.5:11434/v1",
                "plain http to another machine",
            ),
            ("http://example.com/v1", "plain http to another machine"),
            ("https://user:secret@example.com/v1", "holds credentials"),
            ("https://example.com/v1?key=1", "has a query string"),
            ("ftp://127.0.0.1/v1", "must start with http:// or https://"),
            ("127.0.0.1:8080", "must start with http:// or https://"),
        ];
        for (given, why) in refused {
            let err = embeddings_url(given).unwrap_err();
            assert!(matches!(err, ModelError::Remote(_)), "{err:?}");
            assert!(err.to_string().contains(why), "{given}: {err}");
        }
        let target = parse_target("https://gpu.lan/v1/embeddings").unwrap();
        assert_eq!(
            (target.port, target.tls, target.host.as_str()),
            (443, true, "gpu.lan")
        );
    }

    #[test]
    fn answers_are_checked_and_put_in_input_order() {
        let answer = br#"{"object":"list","data":[
            {"object":"embedding","index":1,"embedding":[0.0,1.0]},
            {"object":"embedding","index":0,"embedding":[0.6,0.8]}],"model":"m"}"#;
        assert_eq!(
            parse_vectors(answer, 2, Some(2)).unwrap(),
            vec![vec![0.6f32, 0.8], vec![0.0, 1.0]]
        );
        // Not unit length: made so.
        let answer = br#"{"data":[{"embedding":[3.0,4.0]}]}"#;
        assert_eq!(
            parse_vectors(answer, 1, None).unwrap(),
            vec![vec![0.6f32, 0.8]]
        );
        let refused: [(&[u8], usize, Option<usize>, &str); 7] = [
            (
                br#"{"data":[{"embedding":[1.0]}]}"#,
                2,
                None,
                "holds 1 vectors for 2 texts",
            ),
            (
                br#"{"data":[{"embedding":[1.0,0.0]}]}"#,
                1,
                Some(3),
                "of 2 dimensions, not 3",
            ),
            (
                br#"{"data":[{"embedding":[1.0]},{"embedding":[1.0,0.0]}]}"#,
                2,
                None,
                "of 2 dimensions, not 1",
            ),
            (
                br#"{"data":[{"embedding":[1e300]}]}"#,
                1,
                None,
                "not finite",
            ),
            (
                br#"{"data":[{"index":0,"embedding":[1.0]},{"index":0,"embedding":[1.0]}]}"#,
                2,
                None,
                "two vectors for index 0",
            ),
            (
                br#"{"data":[{"index":5,"embedding":[1.0]}]}"#,
                1,
                None,
                "index 5 of 1",
            ),
            (
                br#"{"data":[{"embedding":"AAAA"}]}"#,
                1,
                None,
                "not an embeddings list",
            ),
        ];
        for (answer, count, dims, why) in refused {
            let err = parse_vectors(answer, count, dims).unwrap_err().to_string();
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn a_servers_error_is_shown_short_on_one_line() {
        assert_eq!(
            error_message(br#"{"error":{"message":"model \"x\" not found","type":"invalid"}}"#),
            "model \"x\" not found"
        );
        assert_eq!(error_message(b"Bad\ngateway"), "Bad gateway");
        let long = "x".repeat(500);
        assert_eq!(
            error_message(long.as_bytes()).chars().count(),
            SHOWN_ERROR_CHARS + 1
        );
    }

    #[test]
    fn what_leaves_is_cut_redacted_and_prefixed() {
        let token = "ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL0zX9cV7b";
        let sent = outgoing(&format!("deploy with {token} today"), "passage: ");
        assert_eq!(sent, "passage: deploy with [REDACTED:github_token] today");
        let long = "é".repeat(MAX_TEXT_BYTES);
        assert_eq!(outgoing(&long, "").len(), MAX_TEXT_BYTES);
    }

    #[test]
    fn after_a_failed_call_the_server_is_left_alone_for_a_while() {
        // A port nothing listens on: every try is refused at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let endpoint = Endpoint {
            url: format!("http://127.0.0.1:{port}/v1/embeddings"),
            model: "m".into(),
            timeout_ms: 1000,
            ..Endpoint::default()
        };
        let manifest = Manifest {
            name: "served".into(),
            kind: KIND.into(),
            dims: 4,
            vocabulary: 0,
            fingerprint: fingerprint(&endpoint, 4),
            source: String::new(),
            max_tokens: None,
            endpoint: Some(endpoint),
        };
        let model = RemoteModel::open(manifest).unwrap();
        let started = Instant::now();
        let first = model.try_embed_many(&["raft"]).unwrap_err();
        assert!(matches!(first, ModelError::Remote(_)), "{first:?}");
        let first = first.to_string();
        // Three tries, 250 ms then 500 ms apart.
        assert!(started.elapsed() >= BACKOFF * 3, "{:?}", started.elapsed());
        assert!(
            first.contains("cannot connect") && first.ends_with("(3 attempts)"),
            "{first}"
        );
        let started = Instant::now();
        let second = model.try_embed_query("raft").unwrap_err().to_string();
        assert!(started.elapsed() < BACKOFF, "{:?}", started.elapsed());
        assert!(
            second.starts_with(&first) && second.contains("(not asked again for "),
            "{second}"
        );
        // The infallible forms give vectors that match nothing.
        assert_eq!(model.embed_query("raft"), vec![0.0; 4]);
    }

    #[test]
    fn the_fingerprint_follows_what_decides_the_vectors() {
        let endpoint = Endpoint {
            url: "http://127.0.0.1:1/v1/embeddings".into(),
            model: "m".into(),
            timeout_ms: 1000,
            ..Endpoint::default()
        };
        let base = fingerprint(&endpoint, 8);
        let keyed = Endpoint {
            api_key_env: Some("KEY".into()),
            timeout_ms: 5,
            ..endpoint.clone()
        };
        assert_eq!(fingerprint(&keyed, 8), base);
        let prefixed = Endpoint {
            passage_prefix: "passage: ".into(),
            ..endpoint.clone()
        };
        assert_ne!(fingerprint(&prefixed, 8), base);
        assert_ne!(fingerprint(&endpoint, 9), base);
    }
}
