//! The secret detectors' figures: recall on planted secrets of every kind
//! (each form in several places of a note, with fresh random values), false
//! positives on planted prose and code about secrets, findings on the real
//! corpora beside the project (`../shared/bench` SciFact and CMRC,
//! `../shared/vaults`; a note when they are absent) listed masked for
//! inspection, and throughput in MB/s. Run with `cargo bench --bench secrets`.

#[path = "support/synth.rs"]
mod synth;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use ctxpack::secrets::{self, DetectorOptions, Finding};

const VALUES_PER_FORM: usize = 4;

/// A small deterministic generator, so that every run plants the same values.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick(&mut self, alphabet: &str) -> char {
        let chars: Vec<char> = alphabet.chars().collect();
        chars[(self.next() % chars.len() as u64) as usize]
    }

    fn token(&mut self, alphabet: &str, length: usize) -> String {
        (0..length).map(|_| self.pick(alphabet)).collect()
    }
}

const HEX: &str = "0123456789abcdef";
const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const URL64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
const SYMBOLS: &str = "!#%&*+-?@^~";

/// A password of letters, digits and a symbol or two.
fn password(rng: &mut Rng) -> String {
    let length = 6 + (rng.next() % 6) as usize;
    let mut value = rng.token(ALNUM, length);
    value.insert(2, rng.pick(SYMBOLS));
    value.push(rng.pick("0123456789"));
    value
}

fn uuid(rng: &mut Rng) -> String {
    format!(
        "{}-{}-{}-{}-{}",
        rng.token(HEX, 8),
        rng.token(HEX, 4),
        rng.token(HEX, 4),
        rng.token(HEX, 4),
        rng.token(HEX, 12)
    )
}

fn base64_lines(rng: &mut Rng, lines: usize, indent: &str) -> String {
    (0..lines)
        .map(|_| format!("{indent}{}", rng.token(B64, 64)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One planted form: the kind it must be found as, and what goes before the
/// secret, the secret, and what goes after it.
struct Form {
    kind: &'static str,
    name: &'static str,
    make: fn(&mut Rng) -> (String, String, String),
}

macro_rules! form {
    ($kind:literal, $name:literal, |$rng:ident| $body:expr) => {
        Form {
            kind: $kind,
            name: $name,
            make: |$rng: &mut Rng| $body,
        }
    };
}

fn bare(secret: String) -> (String, String, String) {
    (String::new(), secret, String::new())
}

fn around(before: &str, secret: String, after: &str) -> (String, String, String) {
    (before.to_string(), secret, after.to_string())
}

fn forms() -> Vec<Form> {
    vec![
        // Provider formats.
        form!("aws_access_key_id", "AKIA", |r| bare(format!(
            "AKIA{}",
            r.token("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
        ))),
        form!("google_api_key", "AIza", |r| bare(format!(
            "AIza{}",
            r.token(URL64, 35)
        ))),
        form!("github_token", "ghp_", |r| bare(format!(
            "ghp_{}",
            r.token(ALNUM, 36)
        ))),
        form!("github_token", "github_pat_", |r| bare(format!(
            "github_pat_{}_{}",
            r.token(ALNUM, 22),
            r.token(ALNUM, 59)
        ))),
        form!("gitlab_token", "glpat-", |r| bare(format!(
            "glpat-{}",
            r.token(URL64, 20)
        ))),
        form!("slack_webhook_url", "hooks.slack.com", |r| around(
            "https://hooks.slack.com/services/",
            format!(
                "T{}/B{}/{}",
                r.token("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 8),
                r.token("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 10),
                r.token(ALNUM, 24)
            ),
            ""
        )),
        form!("slack_token", "xoxb-", |r| bare(format!(
            "xoxb-{}-{}-{}",
            r.token("0123456789", 11),
            r.token("0123456789", 13),
            r.token(ALNUM, 24)
        ))),
        form!("stripe_secret_key", "sk_live_", |r| bare(format!(
            "sk_live_{}",
            r.token(ALNUM, 24)
        ))),
        form!("stripe_secret_key", "rk_live_", |r| bare(format!(
            "rk_live_{}",
            r.token(ALNUM, 24)
        ))),
        form!("stripe_secret_key", "whsec_", |r| bare(format!(
            "whsec_{}",
            r.token(ALNUM, 32)
        ))),
        form!("openai_api_key", "sk-proj-", |r| bare(format!(
            "sk-proj-{}",
            r.token(URL64, 120)
        ))),
        form!("anthropic_api_key", "sk-ant-api03-", |r| bare(format!(
            "sk-ant-api03-{}",
            r.token(URL64, 93)
        ))),
        form!("huggingface_token", "hf_", |r| bare(format!(
            "hf_{}",
            r.token(ALNUM, 34)
        ))),
        form!("npm_token", "npm_", |r| bare(format!(
            "npm_{}",
            r.token(ALNUM, 36)
        ))),
        form!("sendgrid_api_key", "SG.", |r| bare(format!(
            "SG.{}.{}",
            r.token(URL64, 22),
            r.token(URL64, 43)
        ))),
        form!("twilio_api_key", "SK + 32 hex", |r| bare(format!(
            "SK{}",
            r.token(HEX, 32)
        ))),
        form!("telegram_bot_token", "bot token", |r| bare(format!(
            "{}:AA{}",
            r.token("123456789", 10),
            r.token(URL64, 33)
        ))),
        form!("azure_storage_key", "AccountKey=", |r| around(
            "DefaultEndpointsProtocol=https;AccountName=notes7;AccountKey=",
            format!("{}==", r.token(B64, 86)),
            ";EndpointSuffix=core.windows.net"
        )),
        form!("digitalocean_token", "dop_v1_", |r| bare(format!(
            "dop_v1_{}",
            r.token(HEX, 64)
        ))),
        form!("digitalocean_token", "doo_v1_", |r| bare(format!(
            "doo_v1_{}",
            r.token(HEX, 64)
        ))),
        form!("digitalocean_token", "dor_v1_", |r| bare(format!(
            "dor_v1_{}",
            r.token(HEX, 64)
        ))),
        form!("mailgun_api_key", "key- near mailgun", |r| around(
            "Mailgun key ",
            format!("key-{}", r.token(HEX, 32)),
            ""
        )),
        form!("square_token", "sq0atp-", |r| bare(format!(
            "sq0atp-{}",
            r.token(URL64, 22)
        ))),
        form!("square_token", "sq0csp-", |r| bare(format!(
            "sq0csp-{}",
            r.token(URL64, 43)
        ))),
        form!("square_token", "EAAA", |r| bare(format!(
            "EAAA{}",
            r.token(URL64, 60)
        ))),
        form!("shopify_token", "shpat_", |r| bare(format!(
            "shpat_{}",
            r.token(HEX, 32)
        ))),
        form!("shopify_token", "shpss_", |r| bare(format!(
            "shpss_{}",
            r.token(HEX, 32)
        ))),
        form!("shopify_token", "shpca_", |r| bare(format!(
            "shpca_{}",
            r.token(HEX, 32)
        ))),
        form!("shopify_token", "shppa_", |r| bare(format!(
            "shppa_{}",
            r.token(HEX, 32)
        ))),
        form!("discord_bot_token", "bot token", |r| {
            let id = format!("1{}", r.token("0123456789", 17));
            let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id);
            bare(format!("{id}.{}.{}", r.token(URL64, 6), r.token(URL64, 38)))
        }),
        form!("discord_webhook_url", "webhook", |r| around(
            "https://discord.com/api/webhooks/",
            format!("1{}/{}", r.token("0123456789", 17), r.token(URL64, 68)),
            ""
        )),
        form!("databricks_token", "dapi", |r| bare(format!(
            "dapi{}",
            r.token(HEX, 32)
        ))),
        form!("cloudflare_api_token", "near CF_API_TOKEN", |r| around(
            "CF_API_TOKEN ",
            r.token(URL64, 40),
            ""
        )),
        form!("cloudflare_api_token", "near cloudflare", |r| around(
            "cloudflare dns token ",
            r.token(URL64, 40),
            ""
        )),
        form!("pypi_token", "pypi-", |r| bare(format!(
            "pypi-AgEIcHlwaS5vcmc{}",
            r.token(URL64, 150)
        ))),
        form!("heroku_api_key", "HRKU-", |r| bare(format!(
            "HRKU-{}",
            r.token(URL64, 60)
        ))),
        form!("heroku_api_key", "UUID near heroku", |r| around(
            "heroku api key ",
            uuid(r),
            ""
        )),
        form!("sentry_dsn", "DSN", |r| around(
            "https://",
            r.token(HEX, 32),
            "@o4507.ingest.sentry.io/4507123"
        )),
        form!("sentry_token", "sntrys_", |r| bare(format!(
            "sntrys_{}_{}",
            r.token(ALNUM, 120),
            r.token(ALNUM, 43)
        ))),
        form!("vault_token", "hvs.", |r| bare(format!(
            "hvs.{}",
            r.token(URL64, 90)
        ))),
        form!("vault_token", "hvb.", |r| bare(format!(
            "hvb.{}",
            r.token(URL64, 130)
        ))),
        form!("vault_token", "hvr.", |r| bare(format!(
            "hvr.{}",
            r.token(URL64, 60)
        ))),
        form!("atlassian_api_token", "ATATT3", |r| bare(format!(
            "ATATT3{}={}",
            r.token(URL64, 180),
            r.token("0123456789ABCDEF", 8)
        ))),
        form!("docker_token", "dckr_pat_", |r| bare(format!(
            "dckr_pat_{}",
            r.token(URL64, 27)
        ))),
        form!("age_secret_key", "AGE-SECRET-KEY-1", |r| bare(format!(
            "AGE-SECRET-KEY-1{}",
            r.token("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)
        ))),
        form!("grafana_token", "glsa_", |r| bare(format!(
            "glsa_{}_{}",
            r.token(ALNUM, 32),
            r.token(HEX, 8)
        ))),
        form!("grafana_token", "glc_", |r| bare(format!(
            "glc_{}==",
            r.token(B64, 80)
        ))),
        form!("linear_api_key", "lin_api_", |r| bare(format!(
            "lin_api_{}",
            r.token(ALNUM, 40)
        ))),
        form!("notion_token", "secret_", |r| bare(format!(
            "secret_{}",
            r.token(ALNUM, 43)
        ))),
        form!("notion_token", "ntn_", |r| bare(format!(
            "ntn_{}",
            r.token(ALNUM, 46)
        ))),
        form!("doppler_token", "dp.pt.", |r| bare(format!(
            "dp.pt.{}",
            r.token(ALNUM, 43)
        ))),
        form!("doppler_token", "dp.st.", |r| bare(format!(
            "dp.st.{}",
            r.token(ALNUM, 43)
        ))),
        form!("terraform_token", "atlasv1", |r| bare(format!(
            "{}.atlasv1.{}",
            r.token(ALNUM, 14),
            r.token(URL64, 67)
        ))),
        form!("postman_api_key", "PMAK-", |r| bare(format!(
            "PMAK-{}-{}",
            r.token(HEX, 24),
            r.token(HEX, 34)
        ))),
        form!("newrelic_key", "NRAK-", |r| bare(format!(
            "NRAK-{}",
            r.token("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 27)
        ))),
        form!("newrelic_key", "NRII-", |r| bare(format!(
            "NRII-{}",
            r.token(URL64, 32)
        ))),
        form!("jwt", "JWT", |r| bare(format!(
            "eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}",
            r.token(URL64, 40),
            r.token(URL64, 43)
        ))),
        // Passwords as people write them.
        form!("password_assignment", "password: X", |r| around(
            "password: ",
            password(r),
            ""
        )),
        form!("password_assignment", "DB_PASSWORD=X", |r| around(
            "DB_PASSWORD=",
            password(r),
            ""
        )),
        form!("password_assignment", "JSON \"password\"", |r| around(
            "{\"user\": \"ops\", \"password\": \"",
            password(r),
            "\"}"
        )),
        form!("password_assignment", "value holding a word", |r| around(
            "password: ",
            format!("MyPassword!{}", r.token("0123456789", 4)),
            ""
        )),
        form!("password_assignment", "value holding secret", |r| around(
            "db_password=",
            format!("Secret{}{}", r.pick(SYMBOLS), r.token(ALNUM, 5)),
            ""
        )),
        form!("password_assignment", "leading sigil", |r| {
            let sigil = r.pick("$!@&*([{#");
            around("password: ", format!("{sigil}{}", password(r)), "")
        }),
        form!("password_assignment", "quoted passphrase", |r| {
            let words: Vec<String> = (0..4).map(|_| r.token(LOWER, 5)).collect();
            around("password = \"", words.join(" "), "\"")
        }),
        form!("password_assignment", "letters only", |r| around(
            "password: ",
            r.token(LOWER, 9),
            ""
        )),
        form!("password_assignment", "shorter than 6", |r| around(
            "pwd=",
            format!(
                "{}{}{}",
                r.token(ALNUM, 2),
                r.pick(SYMBOLS),
                r.token("0123456789", 2)
            ),
            ""
        )),
        form!("password_assignment", "--password=", |r| around(
            "backup --password=",
            password(r),
            ""
        )),
        form!("password_assignment", "bold key", |r| around(
            "**Password:** ",
            password(r),
            ""
        )),
        form!("password_assignment", "code span", |r| around(
            "wifi password: `",
            password(r),
            "`"
        )),
        form!("command_line_password", "curl -u user:pass", |r| around(
            "curl -u admin:",
            password(r),
            " https://api.internal/v1"
        )),
        form!("command_line_password", "mysql -pX", |r| around(
            "mysql -p",
            r.token(ALNUM, 8),
            ""
        )),
        form!("command_line_password", "mysql -u root -pX", |r| around(
            "mysql -u root -p",
            password(r),
            " notes"
        )),
        form!("command_line_password", "sshpass -p", |r| around(
            "sshpass -p '",
            password(r),
            "' ssh deploy@host"
        )),
        form!("command_line_password", "--password X", |r| around(
            "restic --password ",
            password(r),
            " backup"
        )),
        form!("password_statement", "密码：X", |r| around(
            "密码：",
            password(r),
            ""
        )),
        form!("password_statement", "密码: X", |r| around(
            "密码: ",
            r.token(ALNUM, 10),
            ""
        )),
        form!("password_statement", "口令是X", |r| around(
            "数据库口令是",
            password(r),
            ""
        )),
        form!("password_statement", "密钥：X", |r| around(
            "密钥：",
            r.token(ALNUM, 16),
            ""
        )),
        form!("password_statement", "the admin password is X", |r| around(
            "the admin password is ",
            password(r),
            ""
        )),
        form!(
            "password_statement",
            "password for the db is X",
            |r| around("The password for the db is ", password(r), ".")
        ),
        form!("http_authorization", "Authorization: Bearer", |r| around(
            "Authorization: Bearer ",
            r.token(URL64, 40),
            ""
        )),
        form!("http_authorization", "short Basic", |r| {
            let credentials = format!("ops:{}", r.token(ALNUM, 5));
            around(
                "Authorization: Basic ",
                base64::engine::general_purpose::STANDARD.encode(credentials),
                "",
            )
        }),
        form!("http_authorization", "Authorization: Token", |r| around(
            "Authorization: Token ",
            r.token(HEX, 40),
            ""
        )),
        form!("http_cookie", "Cookie: sessionid=", |r| around(
            "Cookie: sessionid=",
            r.token(HEX, 32),
            ""
        )),
        form!("http_cookie", "Set-Cookie: session=", |r| around(
            "Set-Cookie: session=",
            r.token(URL64, 40),
            "; Path=/; HttpOnly"
        )),
        form!("url_password", "URL", |r| around(
            "postgres://app:",
            password(r).replace(['@', '#', '?', '%'], "x"),
            "@db.internal:5432/notes"
        )),
        form!("secret_assignment", "api_key", |r| around(
            "api_key = \"",
            r.token(ALNUM, 32),
            "\""
        )),
        // Keys.
        form!("private_key", "PEM", |r| bare(format!(
            "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
            base64_lines(r, 3, "")
        ))),
        form!("private_key", "indented PEM without END", |r| around(
            "key: |\n  ",
            format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{}",
                base64_lines(r, 3, "  ")
            ),
            "\nuser: deploy"
        )),
        form!("private_key", "PuTTY .ppk", |r| bare(format!(
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: eddsa-key\nPublic-Lines: 2\n{}\nPrivate-Lines: 1\n{}\nPrivate-MAC: {}",
            base64_lines(r, 2, ""),
            base64_lines(r, 1, ""),
            r.token(HEX, 64)
        ))),
    ]
}

/// (name, a note with `{}` where the form goes, whether a form of several lines fits).
const PLACES: &[(&str, &str, bool)] = &[
    ("alone", "{}", true),
    (
        "prose",
        "We rotated it yesterday: {} (see the runbook).",
        true,
    ),
    ("list item", "- {}\n- the next item", true),
    (
        "frontmatter",
        "---\ntitle: Deploy\n{}\ntags: [ops]\n---\n# Deploy\n",
        true,
    ),
    ("code block", "```bash\n{}\n```\n", true),
    (
        "table cell",
        "| service | value |\n|---|---|\n| api | {} |\n",
        false,
    ),
    ("blockquote", "> {}\n\nAfter the quote.", false),
    ("cjk", "部署说明：{}，请勿外传。", false),
    ("obsidian comment", "%% {} %%", true),
];

/// Prose and code about secrets that must stay as written.
const NEGATIVES: &[&str] = &[
    "the password is stored in the vault",
    "The password is incorrect, try again.",
    "password: see 1Password",
    "Password: required",
    "password: use the one in the vault",
    "password = get_password()",
    "password=args.password",
    "password = self.db_password",
    "password: ${DB_PASSWORD}",
    "password: $DB_PASSWORD",
    "password: <your-password>",
    "password: changeme",
    "password: your_password",
    "password: xxxx",
    "password: ****",
    "password: password",
    "password: secret",
    "password: none",
    "password: true",
    "password = os.environ[\"DB_PASSWORD\"]",
    "password: \"{{ vault_db_password }}\"",
    "password: \"Enter your password\"",
    "password_min_length: 12",
    "passwordless: enabled",
    "Use the --password option to set it.",
    "mysql -u root -p notes",
    "curl -u $USER:$TOKEN https://api.internal",
    "密钥：见附件",
    "密码：请向管理员索取",
    "Authorization: Bearer $TOKEN",
    "Authorization: Basic <credentials>",
    "Cookie: theme=dark; lang=en",
    "Set the Cookie: header yourself.",
    "The bearer of this letter is welcome.",
    "Fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8 on cloudflare/workers-sdk.",
    "Note id 4ecedd25-c149-7142-1931-646aa17ae62e, see heroku docs.",
    "cache key-ffc7ec090d7d3fdd49ff311309ae654d",
    "PuTTY-User-Key-File-3: ssh-ed25519 is the first line of a .ppk file.",
];

fn covers(findings: &[Finding], range: &std::ops::Range<usize>) -> Option<&'static str> {
    findings
        .iter()
        .find(|f| f.range.start <= range.start && range.end <= f.range.end)
        .map(|f| f.kind)
}

fn planted_recall() {
    let options = DetectorOptions::default();
    let mut rng = Rng(0x5eed_2026_1205_0001);
    let mut per_kind: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut misses: Vec<String> = Vec::new();
    let mut wrong_kind = 0;
    for form in forms() {
        for _ in 0..VALUES_PER_FORM {
            let (before, secret, after) = (form.make)(&mut rng);
            for (place, note, multi_line_ok) in PLACES {
                if secret.contains('\n') && !multi_line_ok {
                    continue;
                }
                let (head, tail) = note.split_once("{}").expect("a slot");
                let start = head.len() + before.len();
                let text = format!("{head}{before}{secret}{after}{tail}");
                let range = start..start + secret.len();
                let found = covers(&secrets::find(&text, &options), &range);
                let entry = per_kind.entry(form.kind).or_default();
                entry.1 += 1;
                match found {
                    Some(kind) => {
                        entry.0 += 1;
                        if kind != form.kind {
                            wrong_kind += 1;
                        }
                    }
                    None => {
                        let shown: String = text.chars().take(120).collect();
                        misses.push(format!(
                            "{} / {} in {place}: {shown:?}",
                            form.kind, form.name
                        ));
                    }
                }
            }
        }
    }
    let (found, planted) = per_kind
        .values()
        .fold((0, 0), |(f, p), (kf, kp)| (f + kf, p + kp));
    println!(
        "planted recall: {found} / {planted} ({:.1}%) over {} kinds, {} forms, {VALUES_PER_FORM} values each, {} places; {wrong_kind} found under another kind",
        100.0 * found as f64 / planted as f64,
        per_kind.len(),
        forms().len(),
        PLACES.len()
    );
    for (kind, (found, planted)) in &per_kind {
        if found != planted {
            println!("  {kind}: {found} / {planted}");
        }
    }
    misses.dedup();
    for miss in misses.iter().take(30) {
        println!("  missed: {miss}");
    }

    let mut false_positives = Vec::new();
    let mut checked = 0;
    for negative in NEGATIVES {
        for (place, note, _) in PLACES {
            checked += 1;
            let text = note.replace("{}", negative);
            let findings = secrets::find(&text, &options);
            if !findings.is_empty() {
                let kinds: Vec<&str> = findings.iter().map(|f| f.kind).collect();
                false_positives.push(format!("{negative:?} in {place}: {kinds:?}"));
            }
        }
    }
    println!(
        "planted negatives: {} of {checked} notes with a finding",
        false_positives.len()
    );
    for line in false_positives.iter().take(20) {
        println!("  {line}");
    }
}

/// The texts of one corpus, as ctxpack reads them: a note per file, a document's fields per line of JSONL.
fn corpus_texts(path: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    files_under(path, &mut files);
    let mut texts = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let place = file.display().to_string();
        if file.extension().is_some_and(|e| e == "jsonl") {
            for (index, line) in text.lines().enumerate() {
                let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                let fields: Vec<&str> = ["title", "text"]
                    .iter()
                    .filter_map(|field| value[field].as_str())
                    .collect();
                texts.push((format!("{place}:{}", index + 1), fields.join("\n\n")));
            }
        } else {
            texts.push((place, text));
        }
    }
    texts
}

fn files_under(path: &Path, files: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        let mut children: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
        children.sort();
        for child in children {
            files_under(&child, files);
        }
    } else if path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "md" | "jsonl" | "canvas" | "base"))
    {
        files.push(path.to_path_buf());
    }
}

/// The best of `runs` passes over the texts, in MB/s.
fn throughput(texts: &[&str], options: &DetectorOptions, runs: usize) -> f64 {
    let bytes: usize = texts.iter().map(|t| t.len()).sum();
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let started = Instant::now();
        for text in texts {
            std::hint::black_box(secrets::find(text, options));
        }
        best = best.min(started.elapsed());
    }
    bytes as f64 / 1e6 / best.as_secs_f64().max(1e-9)
}

fn real_corpora() {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    let corpora = [
        ("SciFact", shared.join("bench/scifact/corpus.jsonl")),
        ("CMRC", shared.join("bench/cmrc/corpus.jsonl")),
        ("kepano-obsidian", shared.join("vaults/kepano-obsidian")),
        ("itnotes-zh", shared.join("vaults/itnotes-zh")),
    ];
    for personal_data in [false, true] {
        let options = DetectorOptions { personal_data };
        for (name, path) in &corpora {
            if !path.exists() {
                println!("{name}: not found at {} (skipped)", path.display());
                continue;
            }
            let texts = corpus_texts(path);
            let bytes: usize = texts.iter().map(|(_, t)| t.len()).sum();
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            let mut shown: Vec<String> = Vec::new();
            for (place, text) in &texts {
                for finding in secrets::find(text, &options) {
                    *counts.entry(finding.kind).or_default() += 1;
                    if shown.len() < 40 && !personal_data {
                        let line = 1 + text[..finding.range.start].matches('\n').count();
                        let context_start = text[..finding.range.start]
                            .char_indices()
                            .rev()
                            .nth(39)
                            .map_or(0, |(index, _)| index);
                        let context =
                            text[context_start..finding.range.start].replace(['\n', '\r'], " ");
                        shown.push(format!(
                            "{}  {place}:{line}  …{context}[{}]",
                            finding.kind,
                            secrets::mask(&text[finding.range.clone()])
                        ));
                    }
                }
            }
            let refs: Vec<&str> = texts.iter().map(|(_, t)| t.as_str()).collect();
            let speed = throughput(&refs, &options, 5);
            let total: usize = counts.values().sum();
            println!(
                "{name}{}: {} texts, {:.2} MB, {total} findings {counts:?}, {speed:.0} MB/s",
                if personal_data {
                    " (personal data on)"
                } else {
                    ""
                },
                texts.len(),
                bytes as f64 / 1e6,
            );
            for line in &shown {
                println!("  {line}");
            }
        }
    }
}

fn synthetic_notes() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    synth::generate(dir.path(), 2_000, 42).expect("the synthetic vault");
    let mut files = Vec::new();
    files_under(dir.path(), &mut files);
    let texts: Vec<String> = files
        .iter()
        .filter_map(|file| std::fs::read_to_string(file).ok())
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let bytes: usize = refs.iter().map(|t| t.len()).sum();
    let options = DetectorOptions::default();
    let findings: usize = refs.iter().map(|t| secrets::find(t, &options).len()).sum();
    println!(
        "synthetic notes: {} notes, {:.2} MB, {findings} findings, {:.0} MB/s",
        refs.len(),
        bytes as f64 / 1e6,
        throughput(&refs, &options, 5)
    );
    // Plain prose with no trigger at all: the one Aho-Corasick pass alone.
    let prose = "The committee met on a quiet morning and agreed that the river \
                 crossing would be rebuilt before winter, with stone from the old mill. "
        .repeat(20_000);
    println!(
        "prose without candidates: {:.2} MB, {:.0} MB/s",
        prose.len() as f64 / 1e6,
        throughput(&[prose.as_str()], &options, 5)
    );
}

fn main() {
    // The first calls compile the patterns; keep that out of the figures.
    for form in forms() {
        let (before, secret, after) = (form.make)(&mut Rng(1));
        secrets::find(
            &format!("{before}{secret}{after}"),
            &DetectorOptions::default(),
        );
    }
    planted_recall();
    real_corpora();
    synthetic_notes();
}
