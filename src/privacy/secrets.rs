//! Finding and redacting credentials (and, on request, personal data) in text.
//!
//! Each detector is a provider's documented token format or a `name = value`
//! shape with checks on the value. One case-insensitive Aho-Corasick pass over
//! the text finds the literal each detector needs, so a text with none of them
//! costs that one pass; only the detectors whose literal occurs run their regex.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{LazyLock, OnceLock};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use daachorse::{DoubleArrayAhoCorasick, DoubleArrayAhoCorasickBuilder};
use regex::Regex;

/// One secret found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Byte range of the secret itself (not its key name) in the text.
    pub range: Range<usize>,
    /// One of [`KINDS`].
    pub kind: &'static str,
}

/// What to look for besides credentials.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DetectorOptions {
    /// Also find e-mail addresses and phone numbers.
    pub personal_data: bool,
}

/// How a detector finds its candidates.
enum Matcher {
    /// The secret is the first capture group that took part in the match, or the whole match.
    Pattern {
        pattern: &'static str,
        accept: fn(&str, &Range<usize>) -> bool,
    },
    /// A `-----BEGIN … PRIVATE KEY-----` block up to its END line, or a PuTTY `.ppk` key.
    PrivateKeyBlock,
}

struct Detector {
    kind: &'static str,
    /// Literals of which one must occur for the detector to run; empty = always.
    triggers: &'static [&'static str],
    /// Whether the triggers must match in case too (a provider's prefix) or in any case (a key name).
    exact_triggers: bool,
    /// The byte before the match must not be `[A-Za-z0-9_]`.
    left_bounded: bool,
    /// The byte after the secret must not be `[A-Za-z0-9_]`.
    right_bounded: bool,
    personal: bool,
    matcher: Matcher,
}

/// A detector whose key name may sit at the end of a longer name (`DB_PASSWORD`, `MY_AWS_SECRET_ACCESS_KEY`).
const fn named(
    kind: &'static str,
    triggers: &'static [&'static str],
    pattern: &'static str,
    accept: fn(&str, &Range<usize>) -> bool,
) -> Detector {
    Detector {
        kind,
        triggers,
        exact_triggers: false,
        left_bounded: false,
        right_bounded: true,
        personal: false,
        matcher: Matcher::Pattern { pattern, accept },
    }
}

const fn pattern(
    kind: &'static str,
    triggers: &'static [&'static str],
    pattern: &'static str,
    accept: fn(&str, &Range<usize>) -> bool,
) -> Detector {
    Detector {
        kind,
        triggers,
        exact_triggers: true,
        left_bounded: true,
        right_bounded: true,
        personal: false,
        matcher: Matcher::Pattern { pattern, accept },
    }
}

/// A detector woken by a word in any case: a header's name, or the name of a
/// provider whose format is too plain to stand alone (a UUID, 40
/// characters), where `accept` checks that the word is near.
const fn any_case(
    kind: &'static str,
    triggers: &'static [&'static str],
    pattern: &'static str,
    accept: fn(&str, &Range<usize>) -> bool,
) -> Detector {
    Detector {
        kind,
        triggers,
        exact_triggers: false,
        left_bounded: true,
        right_bounded: true,
        personal: false,
        matcher: Matcher::Pattern { pattern, accept },
    }
}

/// Words for a password in other languages than English and German (lower
/// case, `|` between them): in the pattern, and as
/// [`FOREIGN_PASSWORD_WORDS`] in the code that reads a key.
macro_rules! foreign_password_words {
    () => {
        "kennwort|kennwörter|wachtwoord|wachtwoorden|lösenord|hasło|hasła|contraseña|contrasenya|senha|mots de passe|mot de passe|mot-de-passe|passwörter|пароль|пароли|パスワード|비밀번호|암호|heslo|salasana|jelszó|şifresi|şifre|ŞİFRE|parola|parolă|parool|kata sandi|kata laluan|mật khẩu|كلمة المرور|كلمة السر|رمز عبور|סיסמה|adgangskode|kodeord|passord|κωδικός πρόσβασης|κωδικός|รหัสผ่าน|पासवर्ड|lozinka|лозинка|geslo|slaptažodis|clave|парола|pasahitza|wagwoord|lykilorð"
    };
}

/// Words that put a qualifier after a password's key (`password for the
/// router:`, `contraseña del router:`, `Пароль от роутера:`), in the
/// languages of [`FOREIGN_PASSWORD_WORDS`] (lower case, `|` between them).
macro_rules! qualifier_prepositions {
    () => {
        "for|of|on|at|to|de|del|da|do|du|des|dla|od|für|fuer|von|vom|zum|zur|voor|van|pour|para|per|di|della|till|för|på|til|от|від|для|к|na|za|k|ke|pro|του|για|ng|untuk"
    };
}

/// Bumped whenever a detector changes what it finds: part of the policy's
/// fingerprint, so an index redacted by older detectors is rebuilt.
pub(crate) const DETECTORS_VERSION: u32 = 9;

/// Every detector; on equal ranges the earlier (more specific) one names the finding.
/// Long values are not bounded in the patterns: a bounded repetition is
/// unrolled when the regex is compiled (`[^"]{1,300}` cost ~4 ms in every
/// process that met the word `key`), and matching is linear without it.
static DETECTORS: &[Detector] = &[
    Detector {
        kind: "private_key",
        triggers: &["PRIVATE KEY", "PuTTY-User-Key-File-"],
        exact_triggers: true,
        left_bounded: false,
        right_bounded: false,
        personal: false,
        matcher: Matcher::PrivateKeyBlock,
    },
    pattern(
        "aws_access_key_id",
        &[
            "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA", "AROA", "APKA",
            "ASCA", "A3T",
        ],
        r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA|A3T[A-Z0-9])[A-Z0-9]{16}",
        accept_uppercase_token,
    ),
    named(
        "aws_secret_access_key",
        &[
            "secret_access_key",
            "secretaccesskey",
            "aws_secret",
            "awssecret",
            "secret-access-key",
        ],
        r#"(?i:aws[_-]?secret[_-]?access[_-]?key|aws[_-]?secret[_-]?key|secret[_-]?access[_-]?key)["']?[ \t]*(?:=|:=|:|=>)[ \t]*["']?([A-Za-z0-9/+]{40})"#,
        accept_aws_secret,
    ),
    pattern(
        "google_api_key",
        &["AIza"],
        r"AIza[0-9A-Za-z_-]{35}",
        accept_token_body,
    ),
    pattern(
        "google_oauth_client_secret",
        &["GOCSPX-"],
        r"GOCSPX-[0-9A-Za-z_-]{28}",
        accept_token_body,
    ),
    named(
        "azure_storage_key",
        &["accountkey=", "sharedaccesskey=", "sig="],
        r"(?:(?i:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{30,100}={0,2})|[?&]sig=([A-Za-z0-9%+/]{40,120}(?:=|%3[Dd]){0,2}))",
        accept_token_body,
    ),
    pattern(
        "github_token",
        &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        r"(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{60,250})",
        accept_token_body,
    ),
    pattern(
        "gitlab_token",
        &[
            "glpat-",
            "gldt-",
            "glrt-",
            "glptt-",
            "glft-",
            "glsoat-",
            "glcbt-",
            "gloas-",
            "glimt-",
            "glagent-",
            "glffct-",
            "glwt-",
            "GR1348941",
        ],
        r"(?:gl(?:pat|dt|rt|ptt|ft|soat|cbt|oas|imt|agent|ffct|wt)-[0-9A-Za-z_-]{20,250}(?:\.[0-9A-Za-z_-]{2,80}){0,3}|GR1348941[0-9A-Za-z_-]{20,250})",
        accept_token_body,
    ),
    pattern(
        "slack_webhook_url",
        &["hooks.slack.com"],
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/+-]{20,250})",
        accept_token_body,
    ),
    pattern(
        "slack_token",
        &[
            "xoxa-", "xoxb-", "xoxe", "xoxo-", "xoxp-", "xoxr-", "xoxs-", "xapp-",
        ],
        r"(?:xoxe\.)?(?:xox[abeoprs]|xapp)-[0-9A-Za-z-]{10,250}",
        accept_slack_token,
    ),
    pattern(
        "stripe_secret_key",
        &["sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"],
        r"(?:[rs]k_(?:live|test)_[0-9A-Za-z]{16,247}|whsec_[A-Za-z0-9+/=]{32,100})",
        accept_token_body,
    ),
    pattern(
        "anthropic_api_key",
        &["sk-ant-"],
        r"sk-ant-[a-z]{2,10}[0-9]{0,3}-[A-Za-z0-9_-]{20,250}",
        accept_token_body,
    ),
    pattern(
        "openai_api_key",
        &["sk-"],
        r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,250}",
        accept_openai_key,
    ),
    pattern(
        "huggingface_token",
        &["hf_", "api_org_"],
        r"(?:hf|api_org)_[A-Za-z0-9]{30,40}",
        accept_mixed_token,
    ),
    pattern(
        "groq_api_key",
        &["gsk_"],
        r"gsk_[A-Za-z0-9]{40,60}",
        accept_mixed_token,
    ),
    pattern(
        "replicate_api_token",
        &["r8_"],
        r"r8_[A-Za-z0-9]{30,40}",
        accept_mixed_token,
    ),
    pattern(
        "xai_api_key",
        &["xai-"],
        r"xai-[A-Za-z0-9]{60,100}",
        accept_mixed_token,
    ),
    pattern(
        "perplexity_api_key",
        &["pplx-"],
        r"pplx-[A-Za-z0-9]{40,60}",
        accept_mixed_token,
    ),
    pattern(
        "npm_token",
        &["npm_"],
        r"npm_[A-Za-z0-9]{36}",
        accept_mixed_token,
    ),
    pattern(
        "sendgrid_api_key",
        &["SG."],
        r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,50}",
        accept_token_body,
    ),
    pattern(
        "twilio_api_key",
        &["SK"],
        r"SK[0-9a-f]{32}",
        accept_token_body,
    ),
    pattern(
        "telegram_bot_token",
        &[":AA"],
        r"[0-9]{8,10}:AA[0-9A-Za-z_-]{33}",
        accept_token_body,
    ),
    pattern(
        "digitalocean_token",
        &["dop_v1_", "doo_v1_", "dor_v1_"],
        r"do[opr]_v1_[0-9a-f]{64}",
        accept_random,
    ),
    any_case(
        "mailgun_api_key",
        &["mailgun"],
        r"key-[0-9a-f]{32}|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}",
        accept_near_mailgun,
    ),
    pattern(
        "square_token",
        &["sq0atp-", "sq0csp-", "EAAA"],
        r"sq0atp-[0-9A-Za-z_-]{22}|sq0csp-[0-9A-Za-z_-]{43}|EAAA[0-9A-Za-z_-]{60}",
        accept_random,
    ),
    pattern(
        "shopify_token",
        &["shpat_", "shpss_", "shpca_", "shppa_"],
        r"shp(?:at|ss|ca|pa)_[0-9a-fA-F]{32}",
        accept_random,
    ),
    pattern(
        "discord_webhook_url",
        &["/api/webhooks/"],
        r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/([0-9]{17,20}/[A-Za-z0-9_-]{60,68})",
        accept_token_body,
    ),
    pattern(
        "discord_bot_token",
        // The first part is a user id of 18-19 digits in base64, which
        // starts `MT` for every id since 2017 (`1…`); older 17-digit ids
        // (`OD`, `OT`) are left out, as those two letters in any case would
        // wake the detector on most English text.
        &["MT"],
        r"MT[A-Za-z0-9_-]{22,26}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40}",
        accept_discord_bot_token,
    ),
    pattern(
        "databricks_token",
        &["dapi"],
        r"dapi[0-9a-f]{32}(?:-[0-9]{1,2})?",
        accept_random,
    ),
    any_case(
        "cloudflare_api_token",
        &["cloudflare", "cf_api", "cf-api", "cf_token"],
        r"[A-Za-z0-9_-]{40}|[0-9a-f]{37}",
        accept_near_cloudflare,
    ),
    pattern(
        "pypi_token",
        &["pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"],
        r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]+",
        accept_pypi_token,
    ),
    any_case(
        "heroku_api_key",
        &["HRKU-", "heroku"],
        r"HRKU-[A-Za-z0-9_-]+|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
        accept_heroku_key,
    ),
    any_case(
        "sentry_dsn",
        &["sentry"],
        r"https?://([0-9a-f]{32})(?::[0-9a-f]{32})?@[A-Za-z0-9.-]*sentry[A-Za-z0-9.-]*(?::[0-9]{1,5})?/",
        accept_random,
    ),
    pattern(
        "sentry_token",
        &["sntrys_", "sntryu_"],
        r"sntrys_[A-Za-z0-9+/=_-]+|sntryu_[0-9a-f]{64}",
        accept_sentry_token,
    ),
    pattern(
        "vault_token",
        &["hvs.", "hvb.", "hvr."],
        r"hv[sbr]\.[A-Za-z0-9_-]+",
        accept_vault_token,
    ),
    pattern(
        "atlassian_api_token",
        &["ATATT3", "ATCTT3"],
        r"AT[AC]TT3[A-Za-z0-9_=-]+",
        accept_atlassian_token,
    ),
    pattern(
        "docker_token",
        &["dckr_pat_", "dckr_oat_"],
        r"dckr_(?:pat|oat)_[A-Za-z0-9_-]+",
        accept_docker_token,
    ),
    pattern(
        "age_secret_key",
        &["AGE-SECRET-KEY-1"],
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        accept_random,
    ),
    pattern(
        "grafana_token",
        &["glsa_", "glc_"],
        r"glsa_[A-Za-z0-9]{32}_[0-9a-fA-F]{8}|glc_[A-Za-z0-9+/]+={0,2}",
        accept_grafana_token,
    ),
    pattern(
        "linear_api_key",
        &["lin_api_"],
        r"lin_api_[A-Za-z0-9]{40}",
        accept_random,
    ),
    pattern(
        "notion_token",
        &["secret_", "ntn_"],
        r"secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,50}",
        accept_mixed_token,
    ),
    pattern(
        "doppler_token",
        &[
            "dp.pt.",
            "dp.st.",
            "dp.ct.",
            "dp.sa.",
            "dp.scim.",
            "dp.audit.",
        ],
        r"dp\.(?:pt|st|ct|sa|scim|audit)\.(?:[a-z0-9_-]{1,30}\.)?[A-Za-z0-9]{40,44}",
        accept_random,
    ),
    pattern(
        "terraform_token",
        &[".atlasv1."],
        r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]+",
        accept_terraform_token,
    ),
    pattern(
        "postman_api_key",
        &["PMAK-"],
        r"PMAK-[0-9a-fA-F]{24}-[0-9a-fA-F]{34}",
        accept_random,
    ),
    pattern(
        "newrelic_key",
        &["NRAK-", "NRII-"],
        r"NRAK-[A-Z0-9]{27}|NRII-[A-Za-z0-9_-]{32}",
        accept_random,
    ),
    pattern(
        "jwt",
        &["eyJ"],
        r"eyJ[A-Za-z0-9_-]{8,}\.(?:eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*|[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
        accept_jwt,
    ),
    named(
        "url_password",
        &["://"],
        r"[A-Za-z][A-Za-z0-9+.-]{1,30}://[\x21-\x7E&&[^:/?#@\[\]<>()'`]]{0,100}:([\x21-\x7E&&[^/?#@<>'`]]{1,200})@[A-Za-z0-9\[]",
        accept_url_password,
    ),
    Detector {
        kind: "http_authorization",
        triggers: &["bearer", "authorization"],
        exact_triggers: false,
        left_bounded: true,
        right_bounded: true,
        personal: false,
        matcher: Matcher::Pattern {
            pattern: r#"(?i:authorization)["']?[ \t]*[:=][ \t]*["']?(?i:basic|bearer|token)[ \t]+([A-Za-z0-9._~+/-]+=*)|(?i:bearer)[ \t]+([A-Za-z0-9._~+/-]{8,}=*)"#,
            accept: accept_authorization,
        },
    },
    any_case(
        "http_cookie",
        &["cookie"],
        r#"(?i:set-cookie)[ \t]*:[ \t]*[A-Za-z0-9_.!#$%&*+^|~-]+=([\x21-\x7E&&[^;,"'\\]]+)|(?i:cookie)[ \t]*:[ \t]*((?:[A-Za-z0-9_.-]+=[\x21-\x7E&&[^;,"'\\]]*;[ \t]*)*[A-Za-z0-9_.-]+=[\x21-\x7E&&[^;,"'\\]]+)"#,
        accept_cookie,
    ),
    any_case(
        "command_line_password",
        &["mysql", "mariadb", "sshpass", "curl", "--pass"],
        r#"(?i:mysql[a-z_-]*|mariadb[a-z_-]*)(?:[ \t][^\r\n]*?)?[ \t]-p(?:"([^"\r\n]+)"|'([^'\r\n]+)'|([^\s"'`]+))|(?i:sshpass)[ \t][^\r\n]*?-p[ \t]*(?:"([^"\r\n]+)"|'([^'\r\n]+)'|([^\s"'`]+))|(?i:curl)(?:[ \t][^\r\n]*?)?[ \t](?:-u|--user)(?:[ \t]+|=)["']?[^\s:"'@]+:([^\s"']+)|--(?i:password|passwd|passphrase|pass)[ \t]+(?:"([^"\r\n]+)"|'([^'\r\n]+)'|([^\s"'`-][^\s"'`]*))"#,
        accept_command_line_password,
    ),
    named(
        "password_assignment",
        &[
            "pass",
            "pw",
            "psk",
            "kennwort",
            "wachtwoord",
            "lösenord",
            "LÖSENORD",
            "hasło",
            "HASŁO",
            "contraseña",
            "CONTRASEÑA",
            "senha",
            "пароль",
            "Пароль",
            "ПАРОЛЬ",
            "パスワード",
            "비밀번호",
            "heslo",
            "salasana",
            "jelsz",
            "ifre",
            "İFRE",
            "parol",
            "parool",
            "kodeord",
            "kata sandi",
            "kata laluan",
            "رمز",
            "pasahitza",
            "wagwoord",
            "lykilor",
            "парол",
            "Парол",
            "ПАРОЛ",
            "khẩu",
            "KHẨU",
            "كلمة",
            "סיסמה",
            "암호",
            "adgangskode",
            "κωδικ",
            "Κωδικ",
            "ΚΩΔΙΚ",
            "รหัสผ่าน",
            "पासवर्ड",
            "lozinka",
            "geslo",
            "slapta",
            "clave",
            "contrasenya",
            "лозинка",
            "Лозинка",
            "ЛОЗИНКА",
            "парола",
            "Парола",
            "ПАРОЛА",
        ],
        concat!(
            r#"\[(?i:passwd|password|passphrase|passcode|passwort|pwd|pass|pw)[A-Za-z0-9_.-]{0,40}::[ \t]*([^\[\]\r\n]+)\]|\|[ \t]*(?:\*\*)?(?i:passwd|password|passphrase|passcode|passwort|pwd|pass|pw)[A-Za-z0-9_.-]{0,40}(?:\*\*)?[ \t]*\|[ \t]*([^|\r\n]*[^|\s])[ \t]*\||(?i:passwd|password|passphrase|passcode|passwort|pwd|pass|pw|psk|"#,
            foreign_password_words!(),
            r#")[A-Za-z0-9_.-]{0,40}(?:[ \t]*\([^()\r\n]{1,40}\)|[ \t]*（[^（）\r\n]{1,40}）|[ \t]*\[[^\[\]\r\n]{1,40}\]|[ \t]+\#?[0-9]{1,3}|(?:[ \t]+[\p{L}\p{N}_.@/"'\[\]-]+){1,6})?(?:\*{0,2}[ \t]*[\p{Extended_Pictographic}\x{FE0F}]{1,3})?\*{0,2}["'`]?[ \t\x{A0}\x{2000}-\x{200A}\x{202F}]*(?:::|:=|=>|->|=|:|：|→|—|–|-[ \t])\*{0,2}[ \t\x{A0}\x{2000}-\x{200A}\x{202F}]*(?:(?:&|!!?)[A-Za-z0-9_-]{1,40}[ \t]+)?(?:~~([^~\r\n]+)~~|"([^"\r\n]+)"|'([^'\r\n]+)'|`([^`\r\n]+)`|“([^”\r\n]+)”|‘([^’\r\n]+)’|«([^»\r\n]+)»|「([^」\r\n]+)」|([\x21-\x7E&&[^"'`,;]]+))"#
        ),
        accept_password_value,
    ),
    any_case(
        "password_element",
        &["<pass", "<pwd"],
        r"<(?i:passwd|password|passphrase|pass|pwd)(?:[ \t][^<>\r\n]{0,200})?>([^<\r\n]+)</(?i:passwd|password|passphrase|pass|pwd)>",
        accept_element_password,
    ),
    any_case(
        "pin_assignment",
        &["pin"],
        r#"(?i:pin)(?:[_ -]?(?i:code|number))?\*{0,2}["']?[ \t]*(?:::|=|:|：|->|→|—|–)\*{0,2}[ \t]*([0-9]{4,8})"#,
        accept_pin,
    ),
    named(
        "password_statement",
        &[
            "pass",
            "pwd",
            "密码",
            "密碼",
            "口令",
            "密钥",
            "密鑰",
            "kennwort",
            "wachtwoord",
            "contraseña",
            "CONTRASEÑA",
            "senha",
            "hasło",
            "HASŁO",
            "lösenord",
            "пароль",
            "Пароль",
            "ПАРОЛЬ",
            "парол",
            "Парол",
            "parol",
            "heslo",
            "clave",
        ],
        concat!(
            r#"(?:(?i:password|passphrase|passcode|passwort|pwd|"#,
            foreign_password_words!(),
            r#")(?:[ \t]+(?i:"#,
            qualifier_prepositions!(),
            r#")(?:[ \t]+[\p{L}\p{N}_.@/-]+){1,3})?[ \t]+(?i:is|was|es|est|ist|lautet|é|è|jest|to|är|er|je|это)(?:[ \t]+(?i:now|still|set[ \t]+to|changed[ \t]+to))?(?:[ \t\x{A0}]*:[ \t]*|[ \t]+)|(?i:password|passwort|passphrase|pwd)[ \t]+|(?:密码|密碼|口令|密钥|密鑰)(?:[ \t]*[（(][^（）()\r\n]{1,20}[）)])?[ \t]*(?:(?:是|为|為)[ \t]*[:：]?|[:：=])[ \t]*)(?:"([^"\r\n]+)"|'([^'\r\n]+)'|`([^`\r\n]+)`|“([^”\r\n]+)”|「([^」\r\n]+)」|([\x21-\x7E&&[^"'`]]*[\x21-\x7E&&[^"'`.,;:)]]))"#
        ),
        accept_password_statement,
    ),
    named(
        "secret_assignment",
        &[
            "secret",
            "token",
            "key",
            "credential",
            "creds",
            "salt",
            "auth",
            "bearer",
        ],
        r#"\[(?i:(?:secret|token|api[_-]?key|apikey|access[_-]?key|auth[_-]?key|private[_-]?key|signing[_-]?key|encryption[_-]?key|master[_-]?key|credentials?|creds?|bearer)[A-Za-z0-9_.-]{0,40})::[ \t]*([^\[\]\r\n]+)\]|(?i:(?:secret|token|api[_ -]?key|apikey|access[_-]?key|auth[_-]?key|private[_-]?key|signing[_-]?key|encryption[_-]?key|master[_-]?key|credentials?|creds?|bearer)[A-Za-z0-9_.-]{0,40}(?:[ \t]*\([^()\r\n]{1,40}\))?|salt|auth|key)\*{0,2}["']?[ \t\x{A0}\x{2000}-\x{200A}\x{202F}]*(?:::|=|:=|:|=>)[ \t]*(?:(?:&|!!?)[A-Za-z0-9_-]{1,40}[ \t]+)?(?:"([^"\r\n]+)"|'([^'\r\n]+)'|`([^`\r\n]+)`|([\x21-\x7E&&[^"'`,;]]{1,300}))"#,
        accept_secret_value,
    ),
    Detector {
        kind: "email",
        triggers: &["@"],
        exact_triggers: true,
        left_bounded: false,
        right_bounded: false,
        personal: true,
        matcher: Matcher::Pattern {
            pattern: r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?){0,8}\.[A-Za-z]{2,24}",
            accept: accept_email,
        },
    },
    Detector {
        kind: "phone",
        triggers: &[],
        exact_triggers: true,
        left_bounded: false,
        right_bounded: false,
        personal: true,
        matcher: Matcher::Pattern {
            pattern: r"(?:\+[1-9][0-9]{0,2}(?:[ .-]?\(0\))?(?:[ .-]?\(?[0-9]{1,5}\)?){1,6}|\(0?[0-9]{2,4}\)[ .-]?[0-9]{3,4}[ .-]?[0-9]{3,4}|0[0-9]{1,4}[ /.-][0-9]{2,4}(?:[ .-][0-9]{2,4}){1,3}|0[0-9]{1,4}[ /-][0-9]{5,8}|[2-9][0-9]{2}[.-][0-9]{3}[.-][0-9]{4})",
            accept: accept_phone,
        },
    },
];

/// Every kind a [`Finding`] can have, most specific first.
pub const KINDS: &[&str] = &[
    "private_key",
    "aws_access_key_id",
    "aws_secret_access_key",
    "google_api_key",
    "google_oauth_client_secret",
    "azure_storage_key",
    "github_token",
    "gitlab_token",
    "slack_webhook_url",
    "slack_token",
    "stripe_secret_key",
    "anthropic_api_key",
    "openai_api_key",
    "huggingface_token",
    "groq_api_key",
    "replicate_api_token",
    "xai_api_key",
    "perplexity_api_key",
    "npm_token",
    "sendgrid_api_key",
    "twilio_api_key",
    "telegram_bot_token",
    "digitalocean_token",
    "mailgun_api_key",
    "square_token",
    "shopify_token",
    "discord_webhook_url",
    "discord_bot_token",
    "databricks_token",
    "cloudflare_api_token",
    "pypi_token",
    "heroku_api_key",
    "sentry_dsn",
    "sentry_token",
    "vault_token",
    "atlassian_api_token",
    "docker_token",
    "age_secret_key",
    "grafana_token",
    "linear_api_key",
    "notion_token",
    "doppler_token",
    "terraform_token",
    "postman_api_key",
    "newrelic_key",
    "jwt",
    "url_password",
    "http_authorization",
    "http_cookie",
    "command_line_password",
    "password_assignment",
    "password_element",
    "pin_assignment",
    "password_statement",
    "secret_assignment",
    "email",
    "phone",
];

struct Compiled {
    /// Per detector, its regex (None for the block matcher), compiled the
    /// first time its trigger appears: most runs need few of them, and
    /// compiling all would cost every process milliseconds.
    regexes: Vec<OnceLock<Option<Regex>>>,
    /// Every detector's triggers in one automaton, matched in any case (one
    /// pass over the text). For the first texts a process scans, a
    /// double-array automaton of the triggers in lower case, run over the
    /// text in lower case (ASCII letters only, as the DFA folds them):
    /// built in a third of the time of aho-corasick's contiguous NFA (0.28
    /// against 0.8 ms, which every pack paid) and scanning faster…
    first_triggers: DoubleArrayAhoCorasick<u32>,
    /// …each of its patterns standing for the literals that lower to it;
    lowered_literals: Vec<Vec<usize>>,
    /// …and a DFA, which scans faster still but costs a process a few
    /// milliseconds to build, once it has scanned [`DFA_AFTER_BYTES`].
    triggers_dfa: OnceLock<AhoCorasick>,
    literals: Vec<&'static str>,
    /// Trigger pattern index → (detector index, the literal when it must match in case too);
    /// `usize::MAX` for the characters that fold to ASCII letters ([`FOLDS_TO_ASCII`]).
    trigger_detector: Vec<(usize, Option<&'static str>)>,
    /// Per detector, its slot in the line-local hit lists ([`LINE_LOCAL`]).
    line_local: Vec<Option<usize>>,
}

/// Detectors whose every match lies within one line and holds one of their
/// triggers (in ASCII case): their regex runs only on the lines where a
/// trigger occurs, not over the whole text. With whether a trigger must be
/// followed by an assignment (`name = `, `name: `) to count.
const LINE_LOCAL: &[(&str, bool)] = &[
    ("command_line_password", false),
    ("password_assignment", true),
    ("pin_assignment", true),
    ("password_statement", false),
    ("secret_assignment", true),
];

/// The characters other than ASCII letters that a case-insensitive pattern
/// matches for one (KELVIN SIGN for `k`, LONG S for `s`): a text holding one
/// may match a pattern where no trigger is seen, so there the line-local
/// detectors run over the whole text, as the others do.
const FOLDS_TO_ASCII: &[&str] = &["\u{212A}", "\u{17F}"];

static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    let regexes = DETECTORS.iter().map(|_| OnceLock::new()).collect();
    let mut literals = Vec::new();
    let mut trigger_detector = Vec::new();
    for (index, detector) in DETECTORS.iter().enumerate() {
        for literal in detector.triggers {
            literals.push(*literal);
            trigger_detector.push((index, detector.exact_triggers.then_some(*literal)));
        }
    }
    for literal in FOLDS_TO_ASCII {
        literals.push(*literal);
        trigger_detector.push((usize::MAX, None));
    }
    let line_local = DETECTORS
        .iter()
        .map(|detector| {
            LINE_LOCAL
                .iter()
                .position(|(kind, _)| *kind == detector.kind)
        })
        .collect();
    let (first_triggers, lowered_literals) = lowered_automaton(&literals);
    Compiled {
        regexes,
        first_triggers,
        lowered_literals,
        triggers_dfa: OnceLock::new(),
        literals,
        trigger_detector,
        line_local,
    }
});

/// The double-array automaton of `literals` in lower case (ASCII letters
/// only), and for each of its patterns the literals it stands for.
fn lowered_automaton(literals: &[&str]) -> (DoubleArrayAhoCorasick<u32>, Vec<Vec<usize>>) {
    let mut lowered: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (index, literal) in literals.iter().enumerate() {
        lowered
            .entry(literal.to_ascii_lowercase())
            .or_default()
            .push(index);
    }
    let automaton = DoubleArrayAhoCorasickBuilder::new()
        .match_kind(daachorse::MatchKind::Standard)
        .build_with_values(
            lowered
                .keys()
                .enumerate()
                .map(|(value, pattern)| (pattern, value as u32)),
        )
        .expect("trigger literals are valid");
    (automaton, lowered.into_values().collect())
}

/// Bytes a process scans before it builds the DFA: a command
/// that scans a pack or a few notes never pays for the DFA, an index of a
/// vault builds it at once (the two find the same triggers).
const DFA_AFTER_BYTES: usize = 4 << 20;
static SCANNED_BYTES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn trigger_automaton(literals: &[&str], kind: AhoCorasickKind) -> AhoCorasick {
    // The kind is named: past 100 literals the builder would pick a
    // noncontiguous NFA, the slowest to scan.
    AhoCorasickBuilder::new()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .kind(Some(kind))
        .build(literals)
        .expect("trigger literals are valid")
}

impl Compiled {
    /// Calls `hit` with each occurrence of each trigger literal in `text`,
    /// in any case: the literal's index and where it is. Either automaton
    /// finds the same ones (see [`DFA_AFTER_BYTES`]), not in the same order.
    fn each_trigger(&self, text: &str, mut hit: impl FnMut(usize, Range<usize>)) {
        use std::sync::atomic::Ordering;
        let dfa = self.triggers_dfa.get().or_else(|| {
            let scanned = SCANNED_BYTES.fetch_add(text.len(), Ordering::Relaxed) + text.len();
            (scanned >= DFA_AFTER_BYTES).then(|| {
                self.triggers_dfa
                    .get_or_init(|| trigger_automaton(&self.literals, AhoCorasickKind::DFA))
            })
        });
        match dfa {
            Some(dfa) => {
                for found in dfa.find_overlapping_iter(text) {
                    hit(found.pattern().as_usize(), found.range());
                }
            }
            None => {
                // Lowering ASCII letters keeps every byte where it was.
                let lower = text.to_ascii_lowercase();
                for found in self.first_triggers.find_overlapping_iter(&lower) {
                    for &literal in &self.lowered_literals[found.value() as usize] {
                        hit(literal, found.start()..found.end());
                    }
                }
            }
        }
    }
}

/// The secrets in `text`, sorted by start and non-overlapping; where candidates
/// overlap, the longest wins, then the most specific kind.
pub fn find(text: &str, options: &DetectorOptions) -> Vec<Finding> {
    find_in(text, options, true)
}

/// [`find`], with the line-local detectors run on their lines only when `by_line`.
fn find_in(text: &str, options: &DetectorOptions, by_line: bool) -> Vec<Finding> {
    let compiled = &*COMPILED;
    let mut triggered = vec![false; DETECTORS.len()];
    for (index, detector) in DETECTORS.iter().enumerate() {
        triggered[index] = detector.triggers.is_empty();
    }
    // Where the triggers of the line-local detectors occur.
    let mut hits: [Vec<Range<usize>>; LINE_LOCAL.len()] = Default::default();
    let mut folds_to_ascii = false;
    compiled.each_trigger(text, |literal, range| {
        let (detector, exact) = compiled.trigger_detector[literal];
        if detector == usize::MAX {
            folds_to_ascii = true;
        } else if exact.is_none_or(|literal| &text[range.clone()] == literal) {
            triggered[detector] = true;
            if let Some(slot) = compiled.line_local[detector] {
                hits[slot].push(range);
            }
        }
    });
    let mut candidates: Vec<(Range<usize>, usize)> = Vec::new();
    for (index, detector) in DETECTORS.iter().enumerate() {
        if !triggered[index] || (detector.personal && !options.personal_data) {
            continue;
        }
        // Where the detector looks: a line-local one only at the lines
        // holding its trigger (followed by an assignment, for some). Where
        // there are none its regex is not even compiled: "key" and "token"
        // are in much prose, and compiling cost a search a millisecond.
        let within: Vec<Range<usize>> = match compiled.line_local[index] {
            Some(slot) if by_line && !folds_to_ascii => {
                lines_of(text, std::mem::take(&mut hits[slot]), LINE_LOCAL[slot].1)
            }
            _ => std::iter::once(0..text.len()).collect(),
        };
        if within.is_empty() {
            continue;
        }
        let regex = compiled.regexes[index].get_or_init(|| match detector.matcher {
            Matcher::Pattern { pattern, .. } => {
                Some(Regex::new(pattern).expect("detector patterns are valid"))
            }
            Matcher::PrivateKeyBlock => None,
        });
        match (&detector.matcher, regex) {
            (Matcher::Pattern { accept, .. }, Some(regex)) => {
                for range in within {
                    collect_pattern(
                        text,
                        range,
                        detector,
                        regex,
                        *accept,
                        index,
                        &mut candidates,
                    );
                }
            }
            _ => {
                collect_private_keys(text, index, &mut candidates);
                collect_putty_keys(text, index, &mut candidates);
            }
        }
    }
    // A placeholder an earlier pass wrote (`[REDACTED:password_statement]`)
    // is nobody's key or value: the printed pack is scanned again.
    let placeholders = placeholders_in(text);
    if !placeholders.is_empty() {
        candidates.retain(|(range, _)| {
            !placeholders
                .iter()
                .any(|held| held.start < range.end && range.start < held.end)
        });
    }
    resolve_overlaps(candidates)
}

/// Where the text holds redaction placeholders (`[REDACTED:kind]`).
fn placeholders_in(text: &str) -> Vec<Range<usize>> {
    text.match_indices("[REDACTED:")
        .filter_map(|(at, _)| {
            let close = text[at..].find(']')?;
            Some(at..at + close + 1)
        })
        .collect()
}

/// The lines (without their `\n`) holding one of `hits`, in order, each
/// once; with `assignment`, only hits followed by an assignment count.
/// Linear in the text however many hits a line holds.
fn lines_of(text: &str, mut hits: Vec<Range<usize>>, assignment: bool) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    hits.sort_unstable_by_key(|hit| hit.start);
    let mut lines: Vec<Range<usize>> = Vec::new();
    // Bytes before this are in lines already taken or already looked past.
    let mut seen_to = 0;
    for hit in hits {
        if hit.start < seen_to
            || (assignment && !assignment_follows(bytes, hit.end, starts_a_cell(bytes, hit.start)))
        {
            continue;
        }
        let start = memchr::memrchr(b'\n', &bytes[seen_to..hit.start])
            .map_or(seen_to, |offset| seen_to + offset + 1);
        let end =
            memchr::memchr(b'\n', &bytes[hit.end..]).map_or(bytes.len(), |offset| hit.end + offset);
        lines.push(start..end);
        seen_to = end;
    }
    lines
}

/// Whether the key name that a trigger ending at `end` is part of is followed
/// by `=`, `:` or `：`: name characters, `*` (bold), a quote, then blanks;
/// or by `|` when the name starts a table cell (`| Password | X |`).
/// Takes more than the patterns do (any length of name), never less.
fn assignment_follows(bytes: &[u8], end: usize, in_a_cell: bool) -> bool {
    let mut at = end;
    let name_char = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'*');
    // The rest of the name, in any script (`jelsz|ó`, `κωδικ|ός`).
    while at < bytes.len() {
        match letter_len(bytes, at) {
            Some(len) => at += len,
            None if name_char(bytes[at]) => at += 1,
            None => break,
        }
    }
    // A second word of the name (`pin code: 4071`).
    if bytes.get(at) == Some(&b' ') && bytes.get(at + 1).is_some_and(u8::is_ascii_alphanumeric) {
        let mut second = at + 1;
        while second < bytes.len() && name_char(bytes[second]) {
            second += 1;
        }
        if matches!(
            bytes.get(second),
            Some(b'=' | b':' | b'"' | b'\'' | b' ' | b'\t')
        ) {
            at = second;
        }
    }
    // A qualifier between the name and its value: `password (prod): X`,
    // `password [prod]: X`, `password for the router: X`.
    let mut qualified = at;
    while qualified < bytes.len() && matches!(bytes[qualified], b' ' | b'\t') {
        qualified += 1;
    }
    if let Some(&open @ (b'(' | b'[')) = bytes.get(qualified) {
        let close = if open == b'(' { b')' } else { b']' };
        let window = &bytes[qualified + 1..bytes.len().min(qualified + 42)];
        if let Some(offset) = memchr::memchr(close, window)
            && !window[..offset].contains(&b'\n')
            && assignment_at(bytes, qualified + 2 + offset, false)
        {
            return true;
        }
    }
    // `パスワード（ルーター）：X`: a qualifier in full-width brackets.
    if bytes[qualified.min(bytes.len())..].starts_with("（".as_bytes()) {
        let window = &bytes[qualified..bytes.len().min(qualified + 3 * 42)];
        if let Some(offset) = memchr::memmem::find(window, "）".as_bytes())
            && !window[..offset].contains(&b'\n')
            && assignment_at(bytes, qualified + offset + 3, false)
        {
            return true;
        }
    }
    // `Password 🔑: X`: an emoji after the name.
    let mut past_emoji = qualified;
    while let Some(c) = char_at(bytes, past_emoji).filter(|c| is_key_emoji(*c)) {
        past_emoji += c.len_utf8();
    }
    if past_emoji > qualified && assignment_at(bytes, past_emoji, false) {
        return true;
    }
    if qualified > at {
        // Up to six more words of a name (`for the new office router`,
        // `for "wifi"`, `2`, `#2`).
        let mut word_end = qualified;
        for _ in 0..6 {
            let mut end = word_end;
            while end < bytes.len() && bytes[end] == b' ' {
                end += 1;
            }
            let start = end;
            while end < bytes.len() {
                if let Some(len) = letter_len(bytes, end) {
                    end += len;
                } else if name_char(bytes[end])
                    || matches!(bytes[end], b'@' | b'/' | b'"' | b'\'' | b'[' | b']' | b'#')
                {
                    end += 1;
                } else {
                    break;
                }
            }
            if end == start {
                break;
            }
            word_end = end;
            // `Пароль от роутера - X`: the `-` after a word is the operator.
            if assignment_at(bytes, word_end, false) {
                return true;
            }
        }
    }
    if at < bytes.len() && matches!(bytes[at], b'"' | b'\'' | b'`') {
        at += 1;
    }
    assignment_at(bytes, at, in_a_cell)
}

/// Whether the text before `start` on its line is a table cell's opening
/// `|` (blanks and bold marks between): the only place a key is followed
/// by `|` as its operator. A pack's own header (`8000 tokens | Actual`)
/// is not, and compiling a detector for it cost every pack a millisecond.
fn starts_a_cell(bytes: &[u8], start: usize) -> bool {
    bytes[..start]
        .iter()
        .rev()
        .find(|b| !matches!(b, b' ' | b'\t' | b'*'))
        == Some(&b'|')
}

/// The length of the letter or digit of another script than ASCII that
/// starts at `at` (`ó`, `ő`, `р`), if one does: such a word may name a key
/// or qualify it (`Пароль от роутера:`).
fn letter_len(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at).is_none_or(|b| b.is_ascii()) {
        return None;
    }
    char_at(bytes, at)
        .filter(|c| c.is_alphanumeric())
        .map(char::len_utf8)
}

/// The character that starts at byte `at`, if one does.
fn char_at(bytes: &[u8], at: usize) -> Option<char> {
    let window = bytes.get(at..bytes.len().min(at + 4))?;
    let decoded = match std::str::from_utf8(window) {
        Ok(text) => text,
        Err(error) => std::str::from_utf8(&window[..error.valid_up_to()]).ok()?,
    };
    decoded.chars().next()
}

/// Whether an assignment's operator starts at `at`, after blanks
/// (a no-break or other typographic space included); `|` only `in_a_cell`.
fn assignment_at(bytes: &[u8], mut at: usize, in_a_cell: bool) -> bool {
    loop {
        match bytes.get(at..) {
            Some([b' ' | b'\t', ..]) => at += 1,
            Some([0xC2, 0xA0, ..]) => at += 2,
            Some([0xE2, 0x80, 0x80..=0x8A | 0xAF, ..]) => at += 3,
            _ => break,
        }
    }
    let rest = &bytes[at.min(bytes.len())..];
    // `| Password | X |`: a table row whose label cell names the key.
    matches!(bytes.get(at), Some(b'=' | b':'))
        || (in_a_cell && bytes.get(at) == Some(&b'|'))
        || rest.starts_with(b"->")
        || rest.starts_with(b"- ")
        || rest.starts_with(b"-\t")
        || (at > 0 && bytes[at - 1] == b'-' && rest.first() == Some(&b'>'))
        || ["：", "—", "–", "→"]
            .iter()
            .any(|arrow| rest.starts_with(arrow.as_bytes()))
}

/// The matches of `regex` in `text[within]` (a line, or the whole text).
fn collect_pattern(
    text: &str,
    within: Range<usize>,
    detector: &Detector,
    regex: &Regex,
    accept: fn(&str, &Range<usize>) -> bool,
    index: usize,
    candidates: &mut Vec<(Range<usize>, usize)>,
) {
    let bytes = text.as_bytes();
    let offset = within.start;
    // Where the values listed after the last secret end: a secret among
    // them lists no more (`X1, X2, …` read once, not once per item).
    let mut listed_until = 0;
    for captures in regex.captures_iter(&text[within]) {
        let whole = captures.get(0).expect("group 0 always matches");
        let whole = offset + whole.start()..offset + whole.end();
        let secret = captures
            .iter()
            .skip(1)
            .flatten()
            .next()
            .map_or(whole.clone(), |group| {
                offset + group.start()..offset + group.end()
            });
        let secret = before_comment_marker(text, secret);
        let secret = if matches!(detector.kind, "password_assignment" | "secret_assignment") {
            before_sentence_end(text, secret)
        } else {
            secret
        };
        if (detector.left_bounded
            && !glued_prefix_allowed(detector.kind)
            && is_word_byte_at(bytes, whole.start.wrapping_sub(1)))
            || (detector.right_bounded && is_word_byte_at(bytes, secret.end))
        {
            continue;
        }
        // `[passwords:: X1, X2]`: Dataview's bracketed field holds a list.
        if matches!(detector.kind, "password_assignment" | "secret_assignment")
            && bytes[whole.start] == b'['
            && text[secret.clone()].contains(',')
        {
            let mut at = secret.start;
            for (position, part) in text[secret.clone()].split(',').enumerate() {
                let blank = part.len() - part.trim_start().len();
                let item = at + blank..at + part.trim_end().len();
                at += part.len() + 1;
                // The first item follows the key; the others read as the
                // items of any list after a secret do.
                let taken = match position {
                    0 => !item.is_empty() && accept(text, &item),
                    _ => reads_as_a_listed_secret(text, &item),
                };
                if taken {
                    candidates.push((item, index));
                }
            }
            continue;
        }
        let assignment = matches!(detector.kind, "password_assignment" | "secret_assignment");
        if secret.is_empty() || !accept(text, &secret) {
            // `passwords: prod X, staging Y`: a label before the first value.
            if assignment && let Some(value) = labelled_value(text, &secret) {
                let listed = items_after(text, &value);
                listed_until = listed.last().map_or(value.end, |item| item.end);
                candidates.push((value, index));
                candidates.extend(listed.into_iter().map(|item| (item, index)));
            }
            continue;
        }
        let secret = if matches!(detector.kind, "password_assignment" | "password_statement") {
            with_password_words(text, secret)
        } else {
            secret
        };
        // `New password: ~~old~~ NEW`: the struck value was the password,
        // the word after it is the one now.
        let replacement = (detector.kind == "password_assignment")
            .then(|| struck_then_new(text, &secret))
            .flatten();
        let listed = if assignment && secret.start >= listed_until {
            items_after(text, &secret)
        } else {
            Vec::new()
        };
        if let Some(last) = listed.last() {
            listed_until = last.end;
        }
        candidates.push((secret, index));
        if let Some(new) = replacement {
            candidates.push((new, index));
        }
        candidates.extend(listed.into_iter().map(|item| (item, index)));
    }
}

/// The values listed after a secret's (`passwords: X1, X2`, `token:: X1;
/// X2`, `X1 and X2`, each maybe quoted) that read as secrets themselves:
/// not a plain word (`X1, see the wiki`), at least six characters.
fn items_after(text: &str, secret: &Range<usize>) -> Vec<Range<usize>> {
    // Each item is read once and the line bounds them: the bound only
    // keeps a hostile line from growing the list without end.
    const MAX_ITEMS: usize = 1024;
    const SEPARATORS: &[&str] = &[
        ",", ";", "、", "，", "；", "|", "·", "/", "(", "→", "->", "=>", "—", "–", "and ", "or ",
        "vs. ", "vs ", "und ", "oder ", "y ", "o ", "et ", "ou ", "e ", "и ", "или ",
    ];
    const WRAPPERS: &[char] = &['"', '\'', '`', '*', '“', '”', '‘', '’'];
    let mut items = Vec::new();
    let mut end = secret.end;
    let mut previous = secret.clone();
    while items.len() < MAX_ITEMS {
        // Past the closing quote or bold of the value before, and blanks.
        let after_value = text[end..].trim_start_matches(WRAPPERS);
        let rest = after_value.trim_start_matches([' ', '\t']);
        let spaced = rest.len() < after_value.len();
        let separated = SEPARATORS.iter().find_map(|sep| rest.strip_prefix(sep));
        // `token:: X1 X2`: blanks alone separate only values of one shape.
        let Some(after) = separated.or(spaced.then_some(rest)) else {
            break;
        };
        let blank_after = after.trim_start_matches([' ', '\t']);
        // `X, Y, and Z`: a word after a comma joins the last item.
        let blank_after = ["and ", "or ", "und ", "y ", "et ", "и "]
            .iter()
            .find_map(|word| blank_after.strip_prefix(word))
            .map_or(blank_after, |rest| rest.trim_start_matches([' ', '\t']));
        // `X (was Y)`, `X, old: Y`, `prod X, staging Y`: a label before a value.
        let blank_after = without_value_label(blank_after);
        let item = value_at(text, text.len() - blank_after.len());
        // (`pass=X1 pass=X2`: the next item is an assignment of its own.)
        let shaped_alike = || {
            same_shape(&text[previous.clone()], &text[item.clone()])
                && !text[item.clone()].contains('=')
        };
        if !reads_as_a_listed_secret(text, &item) || (separated.is_none() && !shaped_alike()) {
            break;
        }
        end = item.end;
        previous = item.clone();
        items.push(item);
    }
    items
}

/// The value that starts at `start` (after its opening quote or bold, if
/// any): printable ASCII up to a quote, a list separator or a blank.
fn value_at(text: &str, start: usize) -> Range<usize> {
    const WRAPPERS: &[char] = &['"', '\'', '`', '*', '“', '”', '‘', '’'];
    let unwrapped = text[start..].trim_start_matches(WRAPPERS);
    let wrapped = unwrapped.len() < text.len() - start;
    let start = text.len() - unwrapped.len();
    let len = unwrapped
        .bytes()
        .take_while(|b| {
            b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'`' | b',' | b';' | b'|')
        })
        .count();
    let mut item = before_sentence_end(text, start..start + len);
    if wrapped {
        let value = text[item.clone()].trim_end_matches('*');
        item.end = item.start + value.len();
    }
    item
}

/// `passwords: prod X`: the value after a label that an assignment took
/// for its value, if it reads as a secret.
fn labelled_value(text: &str, label: &Range<usize>) -> Option<Range<usize>> {
    let from_label = &text[label.start..];
    let after = without_value_label(from_label);
    if after.len() == from_label.len() {
        return None;
    }
    let value = value_at(text, text.len() - after.len());
    reads_as_a_listed_secret(text, &value).then_some(value)
}

/// Words that label a value listed after a secret: what it was, is, or
/// where it is used (`X (was Y)`, `X, old: Y`, `prod X, staging Y`).
const VALUE_LABELS: &[&str] = &[
    "previously",
    "previous",
    "formerly",
    "before",
    "backup",
    "alternative",
    "alt",
    "also",
    "was",
    "old",
    "new",
    "now",
    "then",
    "prev",
    "production",
    "prod",
    "staging",
    "stage",
    "dev",
    "test",
    "live",
];

/// `text` without a value label at its start and the colon and blanks after it.
fn without_value_label(text: &str) -> &str {
    VALUE_LABELS
        .iter()
        .find_map(|label| {
            let head = text.get(..label.len())?;
            let rest = &text[label.len()..];
            (head.eq_ignore_ascii_case(label) && rest.starts_with([':', ' ', '\t']))
                .then(|| rest.trim_start_matches(':').trim_start_matches([' ', '\t']))
        })
        .unwrap_or(text)
}

/// Whether two values have letters of both cases and digits alike: two
/// passwords side by side (`X1 X2`), not a password and a shell argument
/// (`PASSWORD=123456 mysql:8.0`).
fn same_shape(first: &str, second: &str) -> bool {
    let shape = |value: &str| {
        (
            value.bytes().any(|b| b.is_ascii_uppercase()),
            value.bytes().any(|b| b.is_ascii_lowercase()),
            value.bytes().any(|b| b.is_ascii_digit()),
        )
    };
    shape(first) == (true, true, true) && shape(second) == (true, true, true)
}

/// Whether an item listed after a secret reads as one itself: six
/// characters or more, not a plain word, a password's shape.
fn reads_as_a_listed_secret(text: &str, item: &Range<usize>) -> bool {
    let value = &text[item.clone()];
    value.len() >= 6
        && !value.chars().all(char::is_alphabetic)
        && password_value_ok(text, item, false)
}

/// The value written right after a struck-out password value (`~~old~~
/// NEW`), if it reads as a password.
fn struck_then_new(text: &str, struck: &Range<usize>) -> Option<Range<usize>> {
    let after = text[struck.end..].strip_prefix("~~")?;
    let start = struck.end + 2 + (after.len() - after.trim_start_matches([' ', '\t']).len());
    let len = text[start..]
        .bytes()
        .take_while(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'`' | b',' | b';'))
        .count();
    let new = before_sentence_end(text, start..start + len);
    (start > struck.end + 2 && !new.is_empty() && password_value_ok(text, &new, false))
        .then_some(new)
}

/// Tokens whose prefix no word or number ends in (`ghp_`, `glpat-`,
/// `hf_`…): found glued to what comes before (`xghp_…`, `#tagghp_…`, a
/// token pasted without a space), which a word boundary required would
/// have printed whole.
fn glued_prefix_allowed(kind: &str) -> bool {
    matches!(
        kind,
        "github_token"
            | "gitlab_token"
            | "slack_token"
            | "huggingface_token"
            | "anthropic_api_key"
            | "openai_api_key"
            | "stripe_secret_key"
            | "npm_token"
            | "pypi_token"
            | "google_api_key"
            | "google_oauth_client_secret"
    )
}

/// `<password>X</password>` (a settings file pasted into a note): any
/// value but a placeholder.
fn accept_element_password(text: &str, range: &Range<usize>) -> bool {
    let value = text[range.clone()].trim();
    // `<pwd>/home/ana</pwd>`: the working directory a shell reports.
    let a_working_directory = text[..range.start].to_ascii_lowercase().ends_with("<pwd>")
        && (value.starts_with('/') || value.starts_with("~/"))
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-~".contains(&b));
    !is_password_placeholder(value) && !a_working_directory
}

/// `PIN: 582913`: four to eight digits, not one digit repeated (`0000`),
/// nor the first part of a date, time or version (`pin: 2024-05-01`).
fn accept_pin(text: &str, range: &Range<usize>) -> bool {
    let digits = text[range.clone()].as_bytes();
    let after = text.as_bytes().get(range.end..).unwrap_or_default();
    let goes_on_as_a_date =
        matches!(after, [b'-' | b'/' | b'.' | b':', next, ..] if next.is_ascii_digit());
    digits.iter().any(|&d| d != digits[0]) && !goes_on_as_a_date
}

/// Words a password written with spaces may go on over (`password: Zq7v
/// Lm29Rt`) are at most this many; the bound keeps many candidates on one
/// line linear.
const MAX_PASSWORD_WORDS: usize = 8;

/// An unquoted password value, taken on over the words after it on its
/// line that look like more of it (a digit or a symbol in them, beyond a
/// sentence's punctuation): `password: Zq7v Lm29Rt` lost only its first
/// word. Prose after a value (`and nothing else.`) ends it, and so does
/// the space after a shell's `KEY=value` (`PASSWORD=123456 mysql:8.0`: the
/// next argument).
fn with_password_words(text: &str, secret: Range<usize>) -> Range<usize> {
    let before = &text[..secret.start];
    let shell_assignment = before
        .strip_suffix('=')
        .is_some_and(|key| !key.ends_with([' ', '\t']));
    if is_quoted(text, &secret) || shell_assignment {
        return secret;
    }
    let mut end = secret.end;
    for _ in 0..MAX_PASSWORD_WORDS {
        let rest = &text[end..];
        let word_start = rest.len() - rest.trim_start_matches([' ', '\t']).len();
        if word_start == 0 {
            break;
        }
        let word = &rest[word_start..];
        let word_len = word
            .find(|c: char| {
                !c.is_ascii_graphic() || matches!(c, '"' | '\'' | '`' | ',' | ';' | '|')
            })
            .unwrap_or(word.len());
        let word = &word[..word_len];
        // A comment's marker closes the comment the value is in.
        let comment_marker = ["%%", "<!--", "-->"]
            .iter()
            .any(|marker| word.starts_with(marker));
        if comment_marker || !is_password_piece(word) {
            break;
        }
        // A sentence's stop after the password is not part of it, and ends it.
        let kept = word.trim_end_matches(['.', ',', ':', ';', ')', ']']);
        end += word_start + kept.len();
        if kept.len() < word.len() {
            break;
        }
    }
    before_comment_marker(text, secret.start..end)
}

/// `Lm29Rt`, `#7!q`: printable ASCII with a digit or a symbol once a
/// sentence's brackets and punctuation are left aside (`else.`, `(see` are
/// words).
fn is_password_piece(word: &str) -> bool {
    let core = word
        .trim_start_matches(['(', '['])
        .trim_end_matches(['.', ',', ':', ';', '!', '?', ')', ']']);
    !core.is_empty()
        && word.bytes().all(|b| b.is_ascii_graphic())
        && core.bytes().any(|b| !b.is_ascii_alphabetic())
}

/// An unquoted value ends before the stops of the sentence it ends
/// (`Password: X.`, `(password: X)`, `Password: X...`, `password: X:`):
/// taken in, they made the value look like a name or a path and it was
/// printed whole.
fn before_sentence_end(text: &str, secret: Range<usize>) -> Range<usize> {
    if is_quoted(text, &secret) {
        return secret;
    }
    // `==X==` and `**X**`: a highlight or bold around the value is not it.
    let value = &text[secret.clone()];
    for mark in ["==", "**", "__"] {
        if value.len() > 2 * mark.len()
            && let Some(inner) = value.strip_prefix(mark).and_then(|v| v.strip_suffix(mark))
        {
            let start = secret.start + mark.len();
            return before_sentence_end(text, start..start + inner.len());
        }
    }
    let value = &text[secret.clone()];
    // `!` and `?` end many passwords: they stay in.
    let kept = value.trim_end_matches(['.', ')', ':', '…']);
    if kept.is_empty() {
        return secret;
    }
    secret.start..secret.start + kept.len()
}

/// A value stops before a comment's opener or closer: taking `%%` or `<!--`
/// into the redaction would leave the rest of that comment to be printed when
/// comments are stripped afterwards.
fn before_comment_marker(text: &str, secret: Range<usize>) -> Range<usize> {
    let value = &text[secret.clone()];
    match ["%%", "<!--", "-->"]
        .iter()
        .filter_map(|marker| value.find(marker))
        .min()
    {
        Some(offset) => secret.start..secret.start + offset,
        None => secret,
    }
}

static PRIVATE_KEY_BEGIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"-----BEGIN ((?:[A-Z0-9]+ ){0,4})PRIVATE KEY(?: BLOCK)?-----")
        .expect("valid pattern")
});

/// A BEGIN line up to its matching END line, or, without one, over the lines that still look like key material.
fn collect_private_keys(text: &str, index: usize, candidates: &mut Vec<(Range<usize>, usize)>) {
    let mut search_from = 0;
    // Labels with no END line left in the text, so that many BEGIN lines do not each scan to the end.
    let mut labels_without_end: Vec<&str> = Vec::new();
    while let Some(captures) = PRIVATE_KEY_BEGIN.captures_at(text, search_from) {
        let begin = captures.get(0).expect("group 0 always matches");
        let label = captures.get(1).map_or("", |label| label.as_str());
        let end_marker = format!("-----END {label}PRIVATE KEY");
        let end_offset = if labels_without_end.contains(&label) {
            None
        } else {
            let found = text[begin.end()..].find(&end_marker);
            if found.is_none() {
                labels_without_end.push(label);
            }
            found
        };
        let end = match end_offset {
            Some(offset) => {
                let marker_end = begin.end() + offset + end_marker.len();
                let rest = &text[marker_end..];
                let closing = rest
                    .strip_prefix(" BLOCK-----")
                    .map(|_| " BLOCK-----".len())
                    .or_else(|| rest.strip_prefix("-----").map(|_| "-----".len()))
                    .unwrap_or(0);
                marker_end + closing
            }
            None => end_of_key_material(text, begin.range()),
        };
        candidates.push((begin.start()..end, index));
        search_from = end.max(begin.end());
    }
}

fn end_of_key_material(text: &str, begin: Range<usize>) -> usize {
    let bytes = text.as_bytes();
    let mut end = begin.end;
    while end < bytes.len() && is_key_material(bytes[end]) {
        end += 1;
    }
    if end < bytes.len() && bytes[end] != b'\n' && bytes[end] != b'\r' {
        return end;
    }
    // A key quoted in Markdown (`> -----BEGIN …`) goes on with quoted lines.
    let line_start = text[..begin.start]
        .rfind('\n')
        .map_or(0, |offset| offset + 1);
    let quoted = text[line_start..begin.start].trim_start().starts_with('>');
    // Headers (`Proc-Type:`, `Comment:`) only straight after the BEGIN line,
    // then the blank line that ends them; after the first line of key
    // material only key material goes on (a `private: true` line that
    // follows a cut-off key in frontmatter is not part of it).
    let mut headers_allowed = end == begin.end;
    let mut blank_allowed = false;
    // Where the next line is looked for: past a blank line that is part of
    // the block only if key material follows it.
    let mut cursor = end;
    loop {
        let line_start = match text[cursor..].find('\n') {
            Some(offset) => cursor + offset + 1,
            None => return end,
        };
        let line_end = text[line_start..]
            .find('\n')
            .map_or(text.len(), |offset| line_start + offset);
        let line = text[line_start..line_end].trim_end_matches('\r');
        cursor = line_start + line.len();
        // Indented keys (a YAML block, a list item, a code block) keep their indentation.
        let mut content = line.trim_start_matches([' ', '\t']);
        if quoted {
            content = content.trim_start_matches(['>', ' ', '\t']);
        }
        if headers_allowed && is_pem_header(content) {
            blank_allowed = true;
            end = cursor;
            continue;
        }
        headers_allowed = false;
        if blank_allowed && content.is_empty() {
            blank_allowed = false;
            continue;
        }
        blank_allowed = false;
        if content.is_empty() || !content.bytes().all(is_key_material) {
            return end;
        }
        end = cursor;
    }
}

fn is_key_material(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"+/=\\".contains(&byte)
}

/// `Proc-Type: 4,ENCRYPTED`, `DEK-Info: …`, `Comment: …`: a capitalised name.
fn is_pem_header(line: &str) -> bool {
    line.split_once(": ").is_some_and(|(name, value)| {
        name.as_bytes().first().is_some_and(u8::is_ascii_uppercase)
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !value.trim().is_empty()
    })
}

static PUTTY_BEGIN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"PuTTY-User-Key-File-[23]: [^\r\n]*").expect("valid pattern"));

/// A PuTTY `.ppk` key: from its first line over its named fields and the
/// counted lines of public and private key, to `Private-MAC:` (or, cut off,
/// to the last private line). A file whose private lines are missing is not
/// a finding.
fn collect_putty_keys(text: &str, index: usize, candidates: &mut Vec<(Range<usize>, usize)>) {
    // Where the last walk stopped: a header inside lines already walked (a
    // `Comment:` quoting one) starts no walk of its own, so each line is read once.
    let mut walked_to = 0;
    for header in PUTTY_BEGIN.find_iter(text) {
        if header.start() < walked_to {
            continue;
        }
        let mut cursor = header.end();
        let mut counted_lines_left = 0usize;
        let mut in_private = false;
        let mut end = None;
        while let Some(offset) = text[cursor..].find('\n') {
            let line_start = cursor + offset + 1;
            let line_end = text[line_start..]
                .find('\n')
                .map_or(text.len(), |offset| line_start + offset);
            let line = text[line_start..line_end].trim_end_matches('\r');
            let content = line.trim_start_matches([' ', '\t']);
            cursor = line_start + line.len();
            if counted_lines_left > 0 {
                if content.is_empty() || !content.bytes().all(is_key_material) {
                    break;
                }
                counted_lines_left -= 1;
                if in_private {
                    end = Some(cursor);
                }
                continue;
            }
            let Some((name, value)) = content.split_once(": ") else {
                break;
            };
            match name {
                "Encryption" | "Comment" | "Key-Derivation" | "Argon2-Memory" | "Argon2-Passes"
                | "Argon2-Parallelism" | "Argon2-Salt" => {}
                "Public-Lines" | "Private-Lines" => {
                    let Ok(count) = value.trim().parse::<usize>() else {
                        break;
                    };
                    counted_lines_left = count;
                    in_private = name == "Private-Lines";
                }
                "Private-MAC" | "Private-Hash" if end.is_some() => {
                    let value_start = cursor - value.len();
                    let hex = value.bytes().take_while(u8::is_ascii_hexdigit).count();
                    end = Some(value_start + hex);
                    break;
                }
                _ => break,
            }
        }
        walked_to = cursor;
        if let Some(end) = end {
            candidates.push((header.start()..end, index));
        }
    }
}

/// Longest first, then the most specific; kept when it overlaps nothing kept already.
fn resolve_overlaps(mut candidates: Vec<(Range<usize>, usize)>) -> Vec<Finding> {
    candidates.sort_by(|(a, a_detector), (b, b_detector)| {
        let a_personal = DETECTORS[*a_detector].personal;
        let b_personal = DETECTORS[*b_detector].personal;
        a_personal
            .cmp(&b_personal)
            .then((b.end - b.start).cmp(&(a.end - a.start)))
            .then(a_detector.cmp(b_detector))
            .then(a.start.cmp(&b.start))
    });
    let mut kept: BTreeMap<usize, (usize, &'static str)> = BTreeMap::new();
    for (range, detector) in candidates {
        let overlaps_before = kept
            .range(..range.end)
            .next_back()
            .is_some_and(|(_, (end, _))| *end > range.start);
        if !overlaps_before {
            kept.insert(range.start, (range.end, DETECTORS[detector].kind));
        }
    }
    kept.into_iter()
        .map(|(start, (end, kind))| Finding {
            range: start..end,
            kind,
        })
        .collect()
}

/// `text` with each secret replaced by `[REDACTED:<kind>]`, and the findings (ranges in the original `text`).
pub fn redact(text: &str, options: &DetectorOptions) -> (String, Vec<Finding>) {
    let findings = find(text, options);
    let mut redacted = String::with_capacity(text.len());
    let mut copied_up_to = 0;
    for finding in &findings {
        redacted.push_str(&text[copied_up_to..finding.range.start]);
        redacted.push_str("[REDACTED:");
        redacted.push_str(finding.kind);
        redacted.push(']');
        copied_up_to = finding.range.end;
    }
    redacted.push_str(&text[copied_up_to..]);
    (redacted, findings)
}

/// A secret shortened for an audit listing: its first characters (at most 4, a quarter of it at most) and `…`.
pub fn mask(secret: &str) -> String {
    let shown = (secret.chars().count() / 4).min(4);
    let mut masked: String = secret.chars().take(shown).collect();
    masked.push('…');
    masked
}

// `_` is no word byte: Markdown's `_italic_` and `__bold__` wrap a token
// (`_ghp_…_`), and a name joins one (`ghp_…_old`, `#tok_ghp_…`); taking
// `_` for part of a longer word let all of these through.
fn is_word_byte_at(bytes: &[u8], index: usize) -> bool {
    bytes.get(index).is_some_and(u8::is_ascii_alphanumeric)
}

/// Shannon entropy of the characters, in bits per character.
fn entropy(value: &str) -> f64 {
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    let mut total = 0usize;
    for character in value.chars() {
        *counts.entry(character).or_default() += 1;
        total += 1;
    }
    if total == 0 {
        return 0.0;
    }
    counts
        .values()
        .map(|count| {
            let share = *count as f64 / total as f64;
            -share * share.log2()
        })
        .sum()
}

fn distinct_chars(value: &str) -> usize {
    let mut seen: Vec<char> = value.chars().collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

/// Documentation fillers such as `ghp_xxxx…`, `sk-your-key-here` or keys
/// ending in `EXAMPLE`. A word is a filler only where a part of the token
/// (between `_` and `-`) starts with it, or ends with `example`: inside a
/// random body it is chance (`9fK2Lq8ZpXw4yourTmR7vB3nC` is a token).
fn is_filler(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    distinct_chars(value) < 6
        || ["xxxx", "****", "....", "…", "0000000", "1234567", "abcdef"]
            .iter()
            .any(|filler| lower.contains(filler))
        || lower.split(['_', '-']).any(|part| {
            part.starts_with("your") || part.starts_with("example") || part.ends_with("example")
        })
}

/// Whether `value` is written in words alone (letters, `_`, `-`, `.` and
/// spaces): only such a value can stand for a secret by what it says
/// (`your_password_here`, `changeme`). One with digits or other symbols
/// (`MyPassword77`, `YourDog#2019!x`) is judged a secret that happens to
/// hold a word: when in doubt, it is redacted.
fn is_words_only(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b.is_ascii_alphabetic() || b"_-. ".contains(&b))
}

fn accept_token_body(text: &str, range: &Range<usize>) -> bool {
    !is_filler(&text[range.clone()])
}

/// An AWS id is base32 and nearly always holds a digit; a run of capitals alone is more often an acronym-heavy word.
fn accept_uppercase_token(text: &str, range: &Range<usize>) -> bool {
    let value = &text[range.clone()];
    value[4..].bytes().any(|b| b.is_ascii_digit()) && !is_filler(value)
}

fn has_letter_and_digit(value: &str) -> bool {
    value.bytes().any(|b| b.is_ascii_alphabetic()) && value.bytes().any(|b| b.is_ascii_digit())
}

/// Bodies of random mixed-case characters (Hugging Face tokens may hold no digit).
fn accept_mixed_token(text: &str, range: &Range<usize>) -> bool {
    let value = &text[range.clone()];
    let body = value
        .rsplit_once(['_', '-'])
        .map_or(value, |(_, body)| body);
    entropy(body) >= 3.5
        && body.bytes().any(|b| b.is_ascii_uppercase())
        && body.bytes().any(|b| b.is_ascii_lowercase())
        && !is_filler(value)
}

fn accept_aws_secret(text: &str, range: &Range<usize>) -> bool {
    let value = &text[range.clone()];
    has_letter_and_digit(value) && entropy(value) >= 3.5 && !is_filler(value)
}

fn accept_slack_token(text: &str, range: &Range<usize>) -> bool {
    let value = &text[range.clone()];
    value.bytes().filter(u8::is_ascii_digit).count() >= 4 && !is_filler(value)
}

fn accept_openai_key(text: &str, range: &Range<usize>) -> bool {
    let value = &text[range.clone()];
    let body = &value[3..];
    !body.starts_with("ant-")
        && has_letter_and_digit(body)
        && body.bytes().any(|b| b.is_ascii_uppercase())
        && entropy(body) >= 3.5
        && !is_filler(value)
}

/// Provider bodies: random characters of at least two classes (lower case,
/// upper case, digits), not a documentation filler.
fn accept_random(text: &str, range: &Range<usize>) -> bool {
    let value = &text[range.clone()];
    let classes = [
        value.bytes().any(|b| b.is_ascii_lowercase()),
        value.bytes().any(|b| b.is_ascii_uppercase()),
        value.bytes().any(|b| b.is_ascii_digit()),
    ]
    .iter()
    .filter(|present| **present)
    .count();
    classes >= 2 && entropy(value) >= 3.0 && !is_filler(value)
}

/// A random value at least `min_len` bytes long (formats whose length the pattern leaves open).
fn random_of_length(text: &str, range: &Range<usize>, min_len: usize) -> bool {
    range.len() >= min_len && accept_random(text, range)
}

/// Whether one of `words` (any case) occurs in the `before` bytes ahead of
/// the value or the `after` bytes behind it.
fn mentioned_near(
    text: &str,
    range: &Range<usize>,
    words: &[&str],
    before: usize,
    after: usize,
) -> bool {
    let bytes = text.as_bytes();
    let window = &bytes[range.start.saturating_sub(before)..(range.end + after).min(bytes.len())];
    words.iter().any(|word| {
        window
            .windows(word.len())
            .any(|candidate| candidate.eq_ignore_ascii_case(word.as_bytes()))
    })
}

fn accept_near_mailgun(text: &str, range: &Range<usize>) -> bool {
    accept_random(text, range) && mentioned_near(text, range, &["mailgun"], 200, 200)
}

/// A 40-character token needs both cases (a 40-hex commit id near the word must not count).
fn accept_near_cloudflare(text: &str, range: &Range<usize>) -> bool {
    let value = &text[range.clone()];
    let mixed_case = value.bytes().any(|b| b.is_ascii_uppercase())
        && value.bytes().any(|b| b.is_ascii_lowercase());
    (value.len() == 37 || mixed_case)
        && accept_random(text, range)
        && mentioned_near(
            text,
            range,
            &["cloudflare", "cf_api", "cf-api", "cf_token"],
            200,
            0,
        )
}

/// `HRKU-` tokens alone; a UUID (Heroku's older key form, and the form of
/// countless ids) only after the word Heroku and a word for a credential.
fn accept_heroku_key(text: &str, range: &Range<usize>) -> bool {
    if text[range.clone()].starts_with("HRKU-") {
        return random_of_length(text, range, 25);
    }
    let credential_words = ["key", "token", "auth", "secret", "password", "credential"];
    accept_random(text, range)
        && mentioned_near(text, range, &["heroku"], 120, 0)
        && mentioned_near(text, range, &credential_words, 120, 0)
}

/// The first of the three parts is the bot's user id (a decimal snowflake) in base64.
fn accept_discord_bot_token(text: &str, range: &Range<usize>) -> bool {
    use base64::Engine as _;
    let value = &text[range.clone()];
    let id_part = value.split('.').next().unwrap_or("");
    let Ok(id) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(id_part) else {
        return false;
    };
    (17..=20).contains(&id.len()) && id.iter().all(u8::is_ascii_digit) && accept_random(text, range)
}

fn accept_pypi_token(text: &str, range: &Range<usize>) -> bool {
    random_of_length(text, range, 80)
}

fn accept_sentry_token(text: &str, range: &Range<usize>) -> bool {
    random_of_length(text, range, 47)
}

fn accept_vault_token(text: &str, range: &Range<usize>) -> bool {
    random_of_length(text, range, 28)
}

fn accept_atlassian_token(text: &str, range: &Range<usize>) -> bool {
    random_of_length(text, range, 100)
}

fn accept_docker_token(text: &str, range: &Range<usize>) -> bool {
    random_of_length(text, range, 33)
}

fn accept_grafana_token(text: &str, range: &Range<usize>) -> bool {
    random_of_length(text, range, 36)
}

fn accept_terraform_token(text: &str, range: &Range<usize>) -> bool {
    random_of_length(text, range, 80)
}

fn accept_jwt(text: &str, range: &Range<usize>) -> bool {
    entropy(&text[range.clone()]) >= 3.5
}

fn accept_url_password(text: &str, range: &Range<usize>) -> bool {
    let password = &text[range.clone()];
    !is_placeholder(password)
}

/// Values that stand for a secret rather than being one: `changeme`, `<your-token>`, `${VAR}`, `xxxx`, `****`.
fn is_placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    const STANDS_FOR: &[&str] = &[
        "xxxx",
        "****",
        "...",
        "…",
        "${",
        "{{",
        "<",
        ">",
        "%(",
        "$(",
        "change_me",
        "changeme",
        "change-me",
        "example",
        "placeholder",
        "your",
        "redacted",
        "dummy",
        "sample",
        "todo",
        "fixme",
        "replace",
        "insert",
        "secret",
        "password",
        "passwd",
        "token",
        "fake",
    ];
    const KEYWORDS: &[&str] = &[
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "string",
        "str",
        "required",
        "optional",
        "env",
        "empty",
    ];
    const MARKS: &[&str] = &["xxxx", "****", "...", "…", "${", "{{", "%(", "$("];
    lower.starts_with(['$', '%', '!', '&', '*', '@', '[', '(', '{', '#', '<'])
        || MARKS.iter().any(|mark| lower.contains(mark))
        || (is_words_only(value) && STANDS_FOR.iter().any(|filler| lower.contains(filler)))
        || KEYWORDS.contains(&lower.as_str())
        || distinct_chars(value) <= 3
}

/// Code and configuration that name where a secret lives rather than holding it.
fn is_reference(text: &str, range: &Range<usize>) -> bool {
    let value = &text[range.clone()];
    let next = text.as_bytes().get(range.end).copied();
    matches!(next, Some(b'(' | b'[' | b'{'))
        || value.contains("://")
        || value.starts_with(['/', '~', '.', '='])
        || value.contains("==")
        || value.ends_with(['(', ')', ':', '.', '['])
        || value.starts_with("process.env")
        || value.starts_with("os.")
        || value.starts_with("env.")
        || value.starts_with("secrets.")
        || value.starts_with("vault:")
}

fn accept_authorization(text: &str, range: &Range<usize>) -> bool {
    let value = &text[range.clone()];
    let scheme = text_before(text, range.start, 64)
        .trim_end_matches([' ', '\t'])
        .rsplit([' ', '\t', ':', '"', '\''])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    match scheme.as_str() {
        // Basic credentials are `user:password` in base64, however short.
        "basic" if is_basic_credentials(value) => true,
        // After `Authorization:` a bearer token is one however short (it
        // is when written as `bearer: X`); alone, `Bearer X` may be prose.
        "token" | "bearer"
            if scheme == "token"
                || text_before(text, range.start, 64)
                    .to_ascii_lowercase()
                    .contains("authorization") =>
        {
            value.len() >= 8
                && has_letter_and_digit(value)
                && !is_placeholder(value)
                && !is_filler(value)
        }
        // `use header Bearer X for prod`: a shorter value only with
        // letters of both cases and digits, as a password would have.
        _ => {
            (value.len() >= 16 || same_shape(value, value))
                && has_letter_and_digit(value)
                && entropy(value) >= 3.0
                && !is_placeholder(value)
        }
    }
}

/// Base64 of `user:password` with a password that is not a placeholder.
fn is_basic_credentials(value: &str) -> bool {
    use base64::Engine as _;
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(value) else {
        return false;
    };
    let Ok(credentials) = String::from_utf8(decoded) else {
        return false;
    };
    credentials.split_once(':').is_some_and(|(_, password)| {
        !password.is_empty()
            && !password.chars().any(char::is_control)
            && !is_password_placeholder(password)
    })
}

/// A header of cookies: one value at least that looks like a session id, not
/// `theme=dark`.
fn accept_cookie(text: &str, range: &Range<usize>) -> bool {
    text[range.clone()].split(';').any(|pair| {
        let value = pair.split_once('=').map_or(pair, |(_, value)| value);
        let value = value.trim().trim_matches('"');
        value.len() >= 8
            && value.bytes().any(|b| b.is_ascii_alphanumeric())
            && (has_letter_and_digit(value) || entropy(value) >= 3.5)
            && !is_placeholder(value)
            && !is_filler(value)
    })
}

/// After `mysql … -p`, `sshpass -p` or `curl -u user:` anything but a placeholder is the password;
/// after `--password ` the value is judged as in an assignment.
fn accept_command_line_password(text: &str, range: &Range<usize>) -> bool {
    let before = text_before(text, range.start, 200).trim_end_matches(['"', '\'']);
    let long_flag = before
        .trim_end_matches([' ', '\t'])
        .rsplit([' ', '\t'])
        .next()
        .is_some_and(|flag| flag.starts_with("--") && !flag.contains('='));
    if long_flag {
        // `--password PASSWORD`, `--password TEXT`: a usage line's metavariable.
        let metavariable = text[range.clone()]
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b == b'_');
        return !metavariable && password_value_ok(text, range, false);
    }
    let value = &text[range.clone()];
    !is_password_placeholder(value) && !is_reference(text, range)
}

/// The value of a key naming a password, unless the key names something
/// about the password (`password_min_length`, `password_file`) or is
/// another word (`passenger`, `passwordless`).
fn accept_password_value(text: &str, range: &Range<usize>) -> bool {
    let Some(key) = password_word_of_key(text, range.start) else {
        return false;
    };
    let value = &text[range.clone()];
    let plain = value.chars().all(char::is_alphabetic) || value.bytes().all(|b| b.is_ascii_digit());
    (key.plain_value_taken || !plain) && password_value_ok(text, range, false)
}

/// At most the last `max` bytes of the text before `end` (fewer to start on a
/// character): what an accept function reads behind a value, bounded so that
/// many candidates on one long line cost no more than the line.
fn text_before(text: &str, end: usize, max: usize) -> &str {
    let mut start = end.saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..end]
}

/// The verbs (and the words after them) a password statement ends in
/// before its value, lower case.
const STATEMENT_VERBS: &[&str] = &[
    "is", "was", "es", "est", "ist", "lautet", "é", "è", "jest", "to", "är", "er", "je", "это",
    "now", "still",
];

/// `the admin password is X`, `password for the db was X`, `密码：X`, `口令是X`.
fn accept_password_statement(text: &str, range: &Range<usize>) -> bool {
    let before = text_before(text, range.start, 200)
        .trim_end_matches([' ', '\t', '"', '\'', '`', '“', '「']);
    let key = before
        .trim_end_matches([':', '：', '=', ' ', '\t'])
        .trim_end_matches(['是', '为', '為'])
        .trim_end_matches([' ', '\t']);
    // `密码（路由器）：X`: the word before its qualifier.
    let key = key
        .strip_suffix(['）', ')'])
        .and_then(|inside| inside.rsplit_once(['（', '(']))
        .map_or(key, |(word, _)| word.trim_end());
    let after_cjk_word = ["密码", "密碼", "口令", "密钥", "密鑰"]
        .iter()
        .any(|word| key.ends_with(word));
    let mut words = before.rsplit(char::is_whitespace).filter(|w| !w.is_empty());
    let last_word = words.clone().next().unwrap_or("").to_lowercase();
    // `note: password X`, without a verb: only a value shaped as a
    // password is (letters of both cases and digits, eight or more).
    let verb = STATEMENT_VERBS.contains(&last_word.trim_end_matches(':'))
        || before.ends_with(':')
        || after_cjk_word;
    if !verb {
        let value = &text[range.clone()];
        return value.len() >= 8
            && same_shape(value, value)
            && !is_placeholder(value)
            && !is_identifier_words(value)
            && password_value_ok(text, range, false);
    }
    // Polish says `Hasło to X`; in English `password to` leads elsewhere.
    if words
        .next()
        .is_some_and(|verb| verb.eq_ignore_ascii_case("to"))
        && !words.next().is_some_and(|before_to| {
            ["hasło", "hasła", "set", "changed"].contains(&before_to.to_lowercase().as_str())
        })
    {
        return false;
    }
    // After a CJK word an ASCII run is the value (Chinese prose around it is
    // not ASCII); in English a plain lowercase word is more often prose
    // (`the password is incorrect`).
    password_value_ok(text, range, !after_cjk_word) && !is_algorithm_name(&text[range.clone()])
}

/// `AES256`, `RSA-2048`, `ed25519`: what a key is, not the key.
fn is_algorithm_name(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    const ALGORITHMS: &[&str] = &[
        "aes", "rsa", "des", "3des", "sha", "hmac", "ecdsa", "ed25519", "x25519", "dsa", "rc4",
        "md5", "sm2", "sm3", "sm4", "chacha20", "ecc", "argon2", "bcrypt", "scrypt", "pbkdf2",
    ];
    lower.len() <= 20
        && ALGORITHMS.iter().any(|name| {
            lower.strip_prefix(name).is_some_and(|rest| {
                rest.bytes()
                    .all(|b| b.is_ascii_digit() || b"-_/".contains(&b) || b.is_ascii_lowercase())
            })
        })
}

/// Words after the password word in a key that make it name a property of
/// the password rather than hold one.
const ABOUT_A_PASSWORD: &[&str] = &[
    "hash",
    "hashed",
    "file",
    "path",
    "dir",
    "url",
    "uri",
    "env",
    "var",
    "field",
    "label",
    "prompt",
    "hint",
    "hinweis",
    "policy",
    "length",
    "len",
    "min",
    "max",
    "age",
    "expiry",
    "expires",
    "expiration",
    "reset",
    "rotation",
    "count",
    "attempts",
    "retries",
    "strength",
    "required",
    "enabled",
    "enable",
    "disabled",
    "mode",
    "type",
    "manager",
    "store",
    "command",
    "cmd",
    "regex",
    "pattern",
    "rule",
    "rules",
    "format",
    "help",
    "text",
    "placeholder",
    "input",
    "error",
    "message",
    "msg",
    "title",
    "protected",
    "auth",
    "authentication",
    "changed",
    "updated",
    "algorithm",
    "encoding",
    "id",
    "ref",
    "name",
    "complexity",
    "history",
    "lifetime",
    "timeout",
    "validity",
    "show",
    "visible",
    "toggle",
    "button",
    "box",
    "reveal",
    "date",
    "time",
    "at",
    "salt",
    "secret",
    "key",
    "source",
    "provider",
    "helper",
    "less",
];

/// The password word of the key before the value at `value_start`, when the
/// key names a password itself.
fn password_word_of_key(text: &str, value_start: usize) -> Option<KeyWord> {
    let recent = text_before(text, value_start, 200);
    let line = without_node_mark(recent.rsplit('\n').next().unwrap_or(""));
    let before = line.trim_end_matches(|c: char| {
        c.is_whitespace() || "\"'`*=:>：“「—–→-|‘«~".contains(c) || is_key_emoji(c)
    });
    if let Some(word) = password_word_ending(before) {
        return Some(KeyWord::named(word));
    }
    // The key before a qualifier: `password (prod)`, `password [prod]`,
    // `密码（路由器）`, `the password for the router` (`for [[Router]]` too).
    let unqualified = match before.chars().next_back() {
        Some(')') => before.rsplit_once('(').map(|(key, _)| key),
        Some('）') => before.rsplit_once('（').map(|(key, _)| key),
        Some(']') if !before.ends_with("]]") => before.rsplit_once('[').map(|(key, _)| key),
        _ => {
            let words: Vec<&str> = before.split_whitespace().collect();
            // The text before the last `kept` words, as written.
            let cut_before = |kept: usize| {
                let trimmed = before.trim_end();
                let tail = words[words.len() - kept..].join(" ");
                let cut = trimmed.len().checked_sub(tail.len())?;
                trimmed
                    .is_char_boundary(cut)
                    .then(|| trimmed[..cut].trim_end())
            };
            // `password 2`, `password #2`: a numbered key.
            if words.len() >= 2
                && let Some(last) = words.last()
                && last
                    .trim_start_matches('#')
                    .bytes()
                    .all(|b| b.is_ascii_digit())
            {
                return password_word_ending(cut_before(1)?).map(KeyWord::named);
            }
            // The nearest preposition after which the key ends in a
            // password word (`wachtwoord voor de router`: not `de`).
            let after_preposition = (1..=5)
                .filter(|&kept| words.len() >= kept + 2)
                .filter(|&kept| is_qualifier_preposition(words[words.len() - kept - 1]))
                .find_map(|kept| password_word_ending(cut_before(kept + 1)?));
            if let Some(word) = after_preposition {
                return Some(KeyWord::named(word));
            }
            // A key of the password word and a few words naming what it
            // opens, at the start of its line (`password wifi:`, `Passwort
            // WLAN:`, `salasana reitittimeen:`, `mật khẩu đăng nhập:`); not
            // words about the password (`password manager:`), and only a
            // value that is more than a plain word or number.
            return (1..=3).filter(|&kept| words.len() > kept).find_map(|kept| {
                let adjuncts = &words[words.len() - kept..];
                if adjuncts.iter().any(|word| names_a_property(word)) {
                    return None;
                }
                let key = cut_before(kept)?;
                let word = password_word_ending(key)?;
                let key_start = key.len() - key_tail_len(key, word);
                starts_its_line(&key[..key_start]).then_some(KeyWord {
                    plain_value_taken: false,
                })
            });
        }
    };
    password_word_ending(unqualified?.trim_end()).map(KeyWord::named)
}

/// A key that names a password: whether a plain word or number after it is
/// taken for one.
struct KeyWord {
    plain_value_taken: bool,
}

impl KeyWord {
    fn named(word: &'static str) -> Self {
        // `pass` alone also names a pass in a test report or a mountain pass
        // (`Pass: Fail`), and some languages' words for a password are also
        // a word, a key or a headword (`parola: ciao`, `clave: sol`,
        // `heslo: Slovo`).
        let ambiguous = ["pass", "parola", "clave", "heslo", "geslo"].contains(&word);
        Self {
            plain_value_taken: !ambiguous,
        }
    }
}

/// An emoji written after a key (`Password 🔑:`).
fn is_key_emoji(c: char) -> bool {
    matches!(c as u32, 0x1F000..=0x1FAFF | 0x2600..=0x27BF | 0xFE0F | 0x2B00..=0x2BFF)
}

/// Whether a word after a password word names a property of the password
/// (`password manager`, `Passwort Richtlinie` is not listed: a value
/// must still be more than a plain word).
fn names_a_property(word: &str) -> bool {
    let lower = word.to_lowercase();
    let lower = lower.trim_matches(|c: char| !c.is_alphanumeric());
    let singular = lower.strip_suffix('s').unwrap_or(lower);
    ABOUT_A_PASSWORD.contains(&lower)
        || ABOUT_A_PASSWORD.contains(&singular)
        || ["is", "was", "are", "were", "has", "had", "not", "no"].contains(&lower)
}

/// How many bytes at the end of `key` the password `word` takes, as written
/// (its lower case may be another length: `ŞİFRE`).
fn key_tail_len(key: &str, word: &str) -> usize {
    let chars = word.chars().filter(|c| *c != '\u{307}').count();
    key.char_indices()
        .rev()
        .nth(chars.saturating_sub(1))
        .map_or(key.len(), |(index, _)| key.len() - index)
}

/// Whether only list, quote, heading or emphasis marks come before `head`
/// on its line.
fn starts_its_line(head: &str) -> bool {
    head.chars()
        .all(|c| c.is_whitespace() || "-*+>#|_[]()x.0123456789".contains(c))
}

/// The text before a value without the YAML anchor or tag written before
/// it (`password: &p X`, `token: !!str X`), which names the node, not the key.
fn without_node_mark(before: &str) -> &str {
    let trimmed = before.trim_end_matches([' ', '\t']);
    match trimmed.rsplit_once([' ', '\t']) {
        Some((head, mark))
            if mark.len() > 1
                && (mark.starts_with('&') || mark.starts_with('!'))
                && mark[1..]
                    .trim_start_matches('!')
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            head
        }
        _ => before,
    }
}

/// Words for a password in other languages than English and German.
pub(crate) static FOREIGN_PASSWORD_WORDS: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| foreign_password_words!().split('|').collect());

/// Whether `word` (as written) puts a qualifier after a password's key.
fn is_qualifier_preposition(word: &str) -> bool {
    let lower = word.to_lowercase();
    qualifier_prepositions!()
        .split('|')
        .any(|preposition| preposition == lower)
}

/// The password word that ends `before`, a key as written.
fn password_word_ending(before: &str) -> Option<&'static str> {
    // `ŞİFRE` lower-cases to `şi̇fre` (a combining dot over the `i`).
    let lower_tail = text_before(before, before.len(), 40)
        .to_lowercase()
        .replace('\u{307}', "");
    // A plural (`contraseñas`, `senhas`) names passwords too.
    let singular = lower_tail
        .strip_suffix("es")
        .into_iter()
        .chain(lower_tail.strip_suffix('s'));
    if let Some(word) = std::iter::once(lower_tail.as_str())
        .chain(singular)
        .find_map(|tail| {
            FOREIGN_PASSWORD_WORDS
                .iter()
                .find(|word| tail.ends_with(**word))
        })
    {
        return Some(word);
    }
    let key_start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_alphanumeric() || "_.-".contains(*c))
        .last()
        .map_or(before.len(), |(index, _)| index);
    let key = &before[key_start..];
    let lower = key.to_ascii_lowercase();
    const WORDS: &[&str] = &[
        "passphrase",
        "passcode",
        "password",
        "passwort",
        "passwd",
        "pass",
        "pwd",
        "psk",
        "pw",
    ];
    let bytes = key.as_bytes();
    // Where a word starts a part of the key: at its start, after `_ - .`, or at a camelCase hump.
    let starts_a_part = |position: usize| {
        position == 0
            || b"_-.".contains(&bytes[position - 1])
            || (bytes[position].is_ascii_uppercase() && bytes[position - 1].is_ascii_lowercase())
    };
    // The last password word in the key, the longest at its position; the
    // short ones only where they start a part (`StartupWMClass` holds no `pw`).
    let (position, word) = WORDS
        .iter()
        .flat_map(|word| {
            lower
                .match_indices(word)
                .map(|(position, _)| (position, *word))
        })
        .filter(|(position, word)| word.len() > 4 || starts_a_part(*position))
        .max_by_key(|(position, word)| (*position, word.len()))?;
    let suffix_start = position + word.len();
    let suffix = &key[suffix_start..];
    if suffix.is_empty() || suffix == "s" || suffix.bytes().all(|b| b.is_ascii_digit()) {
        return Some(word);
    }
    // A letter straight after the word, but for a camelCase hump, makes
    // another word (`passenger`, `PASSENGER`, `pwned`, `passwordless`).
    if suffix.as_bytes()[0].is_ascii_alphabetic() && !starts_a_part(suffix_start) {
        return None;
    }
    let mut words: Vec<String> = Vec::new();
    for part in suffix.split(['_', '-', '.']) {
        // camelCase parts: `passwordMinLength` → min, length.
        let mut current = String::new();
        let mut previous_lowercase = false;
        for c in part.chars() {
            if c.is_ascii_uppercase() && previous_lowercase {
                words.push(std::mem::take(&mut current));
            }
            previous_lowercase = c.is_ascii_lowercase();
            current.push(c.to_ascii_lowercase());
        }
        if !current.is_empty() {
            words.push(current);
        }
    }
    let about_the_password = words
        .iter()
        .any(|word| ABOUT_A_PASSWORD.contains(&word.as_str()));
    (!about_the_password).then_some(word)
}

/// Whether `value` stands for a password rather than being one, judged on the
/// whole value: `changeme`, `<password>`, `${DB_PASS}`, `$DB_PASS`,
/// `your_password`, `xxxx`, `****`, `password` or `secret` alone, `none`,
/// `{{ vault_db }}`, `*alias`, `!vault`; while `MyPassword!2024` is a password.
fn is_password_placeholder(value: &str) -> bool {
    let value = value.trim();
    // ctxpack's own placeholder, met again by the last check on a
    // printed pack (`[password:: [REDACTED:…]]`).
    // Only the placeholder itself, and the brackets or stops that close
    // what holds it (`[password:: [REDACTED:…]]`): `[REDACTED]Xq7v` is a
    // password.
    let after_placeholder = value.strip_prefix("[REDACTED]").or_else(|| {
        let rest = value.strip_prefix("[REDACTED:")?;
        let kind_len = rest
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || *b == b'_')
            .count();
        rest[kind_len..].strip_prefix(']').filter(|_| kind_len > 0)
    });
    if after_placeholder.is_some_and(|rest| rest.chars().all(|c| "])}.,;:!?\"'`".contains(c))) {
        return true;
    }
    let lower = value.to_ascii_lowercase();
    const STANDS_FOR: &[&str] = &[
        "none",
        "null",
        "nil",
        "true",
        "false",
        "yes",
        "no",
        "undefined",
        "string",
        "str",
        "required",
        "optional",
        "env",
        "empty",
        "hidden",
        "unknown",
        "default",
        "same",
        "blank",
        "redacted",
        "masked",
        "omitted",
        "tbd",
        "todo",
        "fixme",
        "n/a",
        "na",
        "password",
        "passwd",
        "pass",
        "pwd",
        "passphrase",
        "secret",
        "token",
        "changeme",
        "change_me",
        "change-me",
        "changeit",
        "placeholder",
        "example",
        "sample",
        "dummy",
        "option",
        "flag",
        "argument",
        "arg",
        "parameter",
        "param",
        "value",
        "field",
        "prompt",
        "stdin",
        // Types and keywords of the code a note quotes (`log_passwd: __u32,`, `let passwd = unsafe {`).
        "usize",
        "isize",
        "u8",
        "u16",
        "u32",
        "u64",
        "u128",
        "i32",
        "i64",
        "f32",
        "f64",
        "bool",
        "boolean",
        "char",
        "int",
        "integer",
        "float",
        "double",
        "bytes",
        "object",
        "any",
        "unsafe",
        "async",
        "await",
        "static",
        "const",
        "let",
        "mut",
        "self",
        "this",
        "new",
        "function",
        "return",
        "void",
        "nullptr",
    ];
    if STANDS_FOR.contains(&lower.as_str()) {
        return true;
    }
    const MASKS: &[&str] = &["xxxx", "****", "…", "..."];
    const FILLERS: &[&str] = &[
        "changeme",
        "change_me",
        "change-me",
        "placeholder",
        "redacted",
        "example",
    ];
    let words_only = is_words_only(value);
    if MASKS.iter().any(|mask| lower.contains(mask))
        || (words_only && FILLERS.iter().any(|filler| lower.contains(filler)))
        || (words_only
            && [
                "your", "insert", "enter_", "enter-", "replace_", "replace-", "put_",
            ]
            .iter()
            .any(|start| lower.starts_with(start)))
        || ["_here", "-here"].iter().any(|end| lower.ends_with(end))
        || distinct_chars(value) <= 2
        || value.chars().all(|c| "xX*•.#-_=".contains(c))
    {
        return true;
    }
    let is_name = |name: &str| {
        !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-. ".contains(&b))
    };
    let wrapped = [('<', '>'), ('{', '}'), ('[', ']'), ('(', ')'), ('%', '%')]
        .iter()
        .any(|(open, close)| {
            value.len() >= 2
                && value.starts_with(*open)
                && value.ends_with(*close)
                && is_name(value[1..value.len() - 1].trim_matches(['{', '}', ' ']))
        });
    if wrapped
        || value.starts_with("${")
        || value.starts_with("$(")
        || value.starts_with("{{")
        || value.starts_with("%(")
        || value.starts_with('<')
    {
        return true;
    }
    // `$DB_PASS`, `$password`, `*db_password` (a YAML alias), `&pw`, `!vault`, `#tag`:
    // a sigil and a name in one case.
    if let Some(name) = value.strip_prefix(['$', '*', '&', '!', '#', '@', '%']) {
        let one_case_name = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && (name.bytes().all(|b| !b.is_ascii_lowercase())
                || name.bytes().all(|b| !b.is_ascii_uppercase()));
        let tag = value.starts_with('!')
            && name
                .trim_start_matches('!')
                .bytes()
                .all(|b| b.is_ascii_alphabetic());
        if one_case_name || tag {
            return true;
        }
    }
    names_a_secret(value)
}

/// `DB_PASSWORD`, `db.password`, `dbPassword`, `SecretString`: the name of a
/// secret (an environment variable, a key in a vault, a type), not its value.
fn names_a_secret(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let only_name_characters = value
        .bytes()
        .all(|b| b.is_ascii_alphabetic() || b"_-.".contains(&b));
    only_name_characters
        && [
            "password", "passwd", "secret", "token", "pass", "pwd", "key",
        ]
        .iter()
        .any(|word| lower.contains(word))
}

/// Where a value spelt like `os.environ`, `self.password` or `config.db.pw` is read from code, not written.
fn is_dotted_name(value: &str) -> bool {
    let mut parts = value.split('.');
    let first = parts.next().unwrap_or("");
    let is_identifier = |part: &str| {
        part.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    value.contains('.')
        && first.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        && is_identifier(first)
        && parts.all(is_identifier)
}

/// `db_password`, `my-app`, `DB_PASS`, `release-2024`: words of one case and
/// numbers joined by `_ - . /`, the name of a variable rather than a password
/// (`Xy-ab3c` is not: its parts mix cases and digits).
fn is_plain_name(value: &str) -> bool {
    let parts: Vec<&str> = value.split(['_', '-', '.', '/']).collect();
    parts.len() >= 2
        && parts.iter().all(|part| {
            !part.is_empty()
                && (part.bytes().all(|b| b.is_ascii_lowercase())
                    || part.bytes().all(|b| b.is_ascii_uppercase())
                    || part.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// Code rather than a password: a type (`Option<String>`, `Optional[str]`,
/// `&[u8]`, `crate::uid_t`, `__u32`), a call or an index
/// (`&derived_key[len - 2..]`), a number literal (`0x02`).
fn is_code(value: &str) -> bool {
    let bytes = value.as_bytes();
    let generic_or_index = value.find(['<', '[']).is_some_and(|at| {
        at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_')
    });
    let identifier_then_bracket = {
        let name = value.trim_start_matches(['&', '*']);
        let name_length = name
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        name_length > 0 && name[name_length..].starts_with(['(', '[', '<'])
    };
    let hex_literal = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_hexdigit()));
    value.contains("::")
        || value.starts_with("&[")
        || value.starts_with("&mut")
        || value.starts_with("__")
        || generic_or_index
        || identifier_then_bracket
        || hex_literal
}

/// Whether the value is enclosed in quotes (so may hold spaces, and is a literal rather than a name).
fn is_quoted(text: &str, range: &Range<usize>) -> bool {
    let before = text[..range.start].chars().next_back();
    let after = text[range.end..].chars().next();
    matches!(
        (before, after),
        (Some('"'), Some('"'))
            | (Some('\''), Some('\''))
            | (Some('`'), Some('`'))
            | (Some('“'), Some('”'))
            | (Some('「'), Some('」'))
    )
}

/// Whether words go on after the value on its line (`password: stored in the vault`).
fn prose_follows(text: &str, end: usize) -> bool {
    text[end..]
        .trim_start_matches([' ', '\t'])
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric())
}

/// A quoted passphrase of a few plain words; a sentence with its small words
/// is a description (`"The password of the user"`).
fn is_passphrase(value: &str) -> bool {
    const SENTENCE_WORDS: &[&str] = &[
        "the",
        "a",
        "an",
        "of",
        "for",
        "to",
        "your",
        "my",
        "enter",
        "is",
        "in",
        "with",
        "and",
        "or",
        "see",
        "use",
        "from",
        "here",
        "this",
        "that",
        "password",
        "passphrase",
        "secret",
        "token",
        "key",
        "user",
        "required",
        "optional",
        "not",
        "please",
        "must",
        "should",
        "will",
        "be",
        "are",
        "it",
    ];
    let words: Vec<&str> = value.split_whitespace().collect();
    (2..=10).contains(&words.len())
        && !value.trim_end().ends_with(['.', '?', ':'])
        && words.iter().all(|word| {
            !SENTENCE_WORDS.contains(
                &word
                    .to_lowercase()
                    .trim_matches(|c: char| !c.is_alphanumeric()),
            )
        })
}

/// The judgement of a password value on its whole: long enough, not a
/// placeholder, not a name read from code; a plain word or number only where
/// no prose goes on after it (and, in a sentence, only with a capital inside
/// it or in quotes).
fn password_value_ok(text: &str, range: &Range<usize>, in_a_sentence: bool) -> bool {
    let value = &text[range.clone()];
    let quoted = is_quoted(text, range);
    if value.chars().count() < 4 || is_password_placeholder(value) {
        return false;
    }
    if value.contains(char::is_whitespace) {
        return quoted && is_passphrase(value);
    }
    if is_code(value) {
        return false;
    }
    if !quoted && (is_reference(text, range) || is_plain_name(value) || is_dotted_name(value)) {
        return false;
    }
    let letters_only = value.chars().all(char::is_alphabetic);
    let digits_only = value.bytes().all(|b| b.is_ascii_digit());
    // `INVALID_PASSWORD: SqlState = SqlState(…)`: a type annotation.
    let after = text[range.end..].trim_start_matches([' ', '\t']);
    // (`==X==` is a highlight, not an annotation.)
    if !quoted && after.starts_with('=') && !after.starts_with("==") {
        return false;
    }
    if (letters_only || digits_only) && !quoted {
        // `KEY=value` with nothing between is a shell or config line, where
        // more arguments may follow (`-e DB_PASSWORD=123456 mysql:8`); after
        // `: ` words going on are prose (`password: stored in the vault`).
        let right_after_equals = text[..range.start].ends_with('=');
        if !right_after_equals && prose_follows(text, range.end) {
            return false;
        }
        // `let password = config` (`.password()` on the next line): a variable.
        let line = text_before(text, range.start, 200)
            .rsplit('\n')
            .next()
            .unwrap_or("");
        let declared = ["let ", "var ", "const ", "val ", "auto ", "my "]
            .iter()
            .any(|keyword| line.trim_start().starts_with(keyword));
        if letters_only && declared {
            return false;
        }
        let capital_inside = value.chars().skip(1).any(char::is_uppercase);
        if in_a_sentence && letters_only && !capital_inside {
            return false;
        }
    }
    true
}

fn accept_secret_value(text: &str, range: &Range<usize>) -> bool {
    let value = &text[range.clone()];
    // Shorter than the entropy test below can judge, a value under a key
    // that names a secret is read as a password would be.
    if value.len() < 16 && key_names_a_secret(text, range.start) && password_like(text, range) {
        return true;
    }
    value.len() >= 16
        && !value.contains(char::is_whitespace)
        && has_letter_and_digit(value)
        && entropy(value) >= 3.0
        && !is_placeholder(value)
        && !is_reference(text, range)
        && !is_identifier_words(value)
}

/// Whether the key before `start` ends in a word that says its value is a
/// secret (`secret`, `api_token`, `api_key`, `credentials`…), not only a
/// key of some kind (`key`, `auth`, `salt`, `tokenizer`, whose values are
/// more often words or names).
fn key_names_a_secret(text: &str, start: usize) -> bool {
    let before = without_node_mark(text_before(text, start, 64))
        .trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != ')');
    // `token (prod): X`: the key before its qualifier.
    let before = match before.strip_suffix(')').and_then(|b| b.rsplit_once('(')) {
        Some((key, _)) => key,
        None => before,
    };
    let trimmed = before.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    let mut words =
        trimmed.rsplit(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')));
    let last = words.next().unwrap_or("");
    // `api key`, `access key`: a key of two words names what one would.
    let last = match words.next() {
        Some(previous)
            if (last.eq_ignore_ascii_case("key") || last.eq_ignore_ascii_case("keys"))
                && trimmed.len() > last.len() + previous.len()
                && trimmed.as_bytes()[trimmed.len() - last.len() - 1] == b' ' =>
        {
            format!("{previous}{last}")
        }
        _ => last.to_string(),
    };
    let key: String = last
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    // `token_value`, `secret_string`: the secret's own value.
    let key = ["value", "val", "string", "str"]
        .iter()
        .find_map(|suffix| key.strip_suffix(suffix))
        .unwrap_or(&key);
    let key = key.strip_suffix('s').unwrap_or(key);
    [
        "secret",
        "token",
        "apikey",
        "accesskey",
        "secretkey",
        "privatekey",
        "signingkey",
        "encryptionkey",
        "masterkey",
        "authkey",
        "credential",
        "cred",
        "bearer",
        "wifikey",
        "wlankey",
        "networkkey",
        "wpakey",
        "wpa2key",
        "wepkey",
    ]
    .iter()
    .any(|word| key.ends_with(word))
}

/// A value under a key that names a secret, read as a password is: eight
/// characters or more, letters with signs (`Lc6^oI47aSd*Ww4`), or both
/// cases with digits and no separator (`Secret123`); not a name, a
/// placeholder or a reference (`o200k_base`, `page2_cursor`, `USDC-ERC20`,
/// `postgres-creds1` and `see below` are not).
fn password_like(text: &str, range: &Range<usize>) -> bool {
    let value = &text[range.clone()];
    let sign = value
        .chars()
        .any(|c| c.is_ascii_punctuation() && !matches!(c, '_' | '-' | '.'));
    let mixed = value.chars().any(|c| c.is_ascii_uppercase())
        && value.chars().any(|c| c.is_ascii_lowercase())
        && value.chars().any(|c| c.is_ascii_digit())
        && !value.contains(['_', '-', '.']);
    value.chars().count() >= 8
        && value.chars().any(char::is_alphabetic)
        && (sign || mixed)
        && !is_identifier_words(value)
        && !is_placeholder(value)
        && password_value_ok(text, range, false)
}

/// `snake_case`, `kebab-case` or dotted names whose parts are words or small numbers, like `o200k_base` or `my-app-2024`.
fn is_identifier_words(value: &str) -> bool {
    let parts: Vec<&str> = value.split(['_', '-', '.', '/']).collect();
    parts.len() >= 2
        && parts.iter().all(|part| {
            part.bytes().all(|b| b.is_ascii_lowercase())
                || part.bytes().all(|b| b.is_ascii_uppercase())
                || part.len() <= 4
        })
}

/// File names like `icon@2x.png` and `git@host` remotes are not addresses of people.
fn accept_email(text: &str, range: &Range<usize>) -> bool {
    let address = &text[range.clone()];
    let bytes = text.as_bytes();
    let Some((local, domain)) = address.split_once('@') else {
        return false;
    };
    let tld = domain.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    const FILE_EXTENSIONS: &[&str] = &[
        "png", "jpg", "jpeg", "gif", "svg", "webp", "md", "js", "ts", "css", "html", "json", "py",
        "rs", "txt", "pdf", "zip",
    ];
    let domain_lower = domain.to_ascii_lowercase();
    let reserved = ["example.com", "example.org", "example.net", "localhost"]
        .iter()
        .any(|name| domain_lower == *name || domain_lower.ends_with(&format!(".{name}")))
        || [".example", ".test", ".invalid", ".local"]
            .iter()
            .any(|suffix| domain_lower.ends_with(suffix));
    !local.starts_with('.')
        && local != "git"
        && !reserved
        && !FILE_EXTENSIONS.contains(&tld.as_str())
        && !is_word_byte_at(bytes, range.end)
        && (!matches!(bytes.get(range.start.wrapping_sub(1)), Some(b'/' | b':'))
            || text[..range.start].ends_with("mailto:"))
}

fn accept_phone(text: &str, range: &Range<usize>) -> bool {
    let number = &text[range.clone()];
    let bytes = text.as_bytes();
    let before = bytes.get(range.start.wrapping_sub(1)).copied();
    let after = bytes.get(range.end).copied();
    let after_next = bytes.get(range.end + 1).copied();
    if before.is_some_and(|b| b.is_ascii_alphanumeric() || b"._-/+=,".contains(&b))
        || after.is_some_and(|b| b.is_ascii_alphanumeric())
        || (matches!(after, Some(b'.' | b'-' | b'/' | b','))
            && after_next.is_some_and(|b| b.is_ascii_digit()))
    {
        return false;
    }
    // A number that goes on past a single space (`330 000-701 200`) is a figure, not a phone number.
    let continues_left = before == Some(b' ')
        && bytes
            .get(range.start.wrapping_sub(2))
            .is_some_and(u8::is_ascii_digit);
    let continues_right = after == Some(b' ') && after_next.is_some_and(|b| b.is_ascii_digit());
    if continues_left || continues_right || number.starts_with("00") {
        return false;
    }
    let digits = number.bytes().filter(u8::is_ascii_digit).count();
    let groups: Vec<&str> = number
        .split(|c: char| !c.is_ascii_digit())
        .filter(|group| !group.is_empty())
        .collect();
    let looks_like_date =
        groups.len() == 3 && groups[2].len() == 4 && groups[0].len() <= 2 && groups[1].len() <= 2;
    let international = number.starts_with('+');
    let enough_digits = if international {
        (8..=15).contains(&digits)
    } else {
        (9..=12).contains(&digits)
    };
    enough_digits && !looks_like_date
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PERSONAL: DetectorOptions = DetectorOptions {
        personal_data: true,
    };

    /// (kind, text before the secret, the secret, text after it); every string here is made up.
    const SAMPLES: &[(&str, &str, &str, &str)] = &[
        (
            "private_key",
            "",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAiliIusX2bzg+YJY1nlXsSDqD+o1g0ZCw7+KAfQW24a2DLw\nad68OVS+Lr81fsljsQQBu8IHMgWVtPRifaIA4a+pHCwm2OzKHpIQo58qBlq67svd\n-----END RSA PRIVATE KEY-----",
            "",
        ),
        (
            "private_key",
            "",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEqP/zI2adXGjx+shjt0Xn//ICxwPs\nSEvDAwTfeOXS==\n-----END OPENSSH PRIVATE KEY-----",
            "",
        ),
        (
            "private_key",
            "",
            "-----BEGIN PRIVATE KEY-----\r\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQ\r\n-----END PRIVATE KEY-----",
            "",
        ),
        (
            "private_key",
            "",
            "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIGx0Q7kBCvZnZQP5GwI1pMCIuHLt5Et9pFBY2CK08Z8CoAoGCCqGSM49\n-----END EC PRIVATE KEY-----",
            "",
        ),
        (
            "private_key",
            "",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\nComment: made up for a test\n\nlQOYBGmOR69pYamt7uzPVZDo7uR60dIRqITxh7BmiGAj4uDPuhV1C1vVsw98\n=Ab12\n-----END PGP PRIVATE KEY BLOCK-----",
            "",
        ),
        (
            "private_key",
            "\"private_key\": \"",
            r"-----BEGIN PRIVATE KEY-----\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQC7\n-----END PRIVATE KEY-----",
            "\\n\",",
        ),
        (
            "private_key",
            "",
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: eddsa-key-20251201\nPublic-Lines: 2\n3p3wEwboGll5c1n7F1ZCX8CGiouFvMiCGzyqH0LM4OJfooQbrv0NKeNWGgryqqoQ\nuYs4XboDeF9mQf4SRFw6L+UNWKrFGB0HOh+5lX2/1jilO9o8tTVjQ5dAIV+lBgE2\nPrivate-Lines: 2\n2RTPMygcwkFa/orMCfM/2QYi7fEQeMH9SJSy5Y3rn3dH5c6BeDixciVIUtVR9hlf\niNlh77+okiWaYve1ld0LPWEZR4E=\nPrivate-MAC: 85a2110b724c4068b6b2357efce4f0a3e6d9fc50b1f8b6ad7488545a8bdf0381",
            "",
        ),
        (
            "private_key",
            "ssh:\n  key: |\n    ",
            "-----BEGIN RSA PRIVATE KEY-----\n    Y2EQGoK5NfHG81ikRXx3TxRuCRO0OaQV6PyU+M6k6tYX0qhYVMS7t6qM1TobfNPI\n    RWI4Czyx+QiC5dNEgyEY139QRCDF9jM+/9X+JmY41DLFwqrUUOu384vx6Y5Dr7HV",
            "\n  user: deploy",
        ),
        ("aws_access_key_id", "", "AKIANACKPBDJXPHV5WRZ", ""),
        (
            "aws_access_key_id",
            "aws_access_key_id = ",
            "ASIAQWONWUOT2O527F5X",
            "",
        ),
        (
            "aws_secret_access_key",
            "aws_secret_access_key = ",
            "4O5Zi/czrwcK+tmoYgj7LZDwTkENNvOX8R4jI8so",
            "",
        ),
        (
            "aws_secret_access_key",
            "AWS_SECRET_ACCESS_KEY=",
            "tmoYgj7LZDwTkEN4O5Zi/czrwcK+NvOX8R4jI8so",
            "",
        ),
        (
            "aws_secret_access_key",
            "\"SecretAccessKey\": \"",
            "Zi/czrwcK+tmoYgj7LZDwTkENNvOX8R4jI8so4O5",
            "\"",
        ),
        (
            "google_api_key",
            "",
            "AIza-XWbHlKif5hGu-9-fh8k7D5GkbhQW3ShM5N",
            "",
        ),
        (
            "google_oauth_client_secret",
            "",
            "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",
            "",
        ),
        (
            "azure_storage_key",
            "DefaultEndpointsProtocol=https;AccountName=notes7;AccountKey=",
            "mOR69pYamt7uzPVZDo7uR60dIRqITxh7BmiGAj4uDPuhV1C1vVsw9877v3i2J4Fd5QZvea64dR57HX64ZpvO59==",
            ";EndpointSuffix=core.windows.net",
        ),
        (
            "azure_storage_key",
            "Endpoint=sb://notes7.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=",
            "Q7kBCvZnZQP5GwI1pMCIuHLt5Et9pFBY2CK08Z8CPWT=",
            "",
        ),
        (
            "azure_storage_key",
            "https://notes7.blob.core.windows.net/c/a.txt?sv=2024-05-04&sr=b&sig=",
            "vyvQvgXiFo9RVoKQ0elSHStqnpFqF2l1p1ZF7xk4%2BHPQn87J2IM%3D",
            "",
        ),
        (
            "github_token",
            "",
            "ghp_XOYTvNhZMcqXdocw2zvHsLOL6uuxAPJ7OyWa",
            "",
        ),
        (
            "github_token",
            "",
            "gho_62E4V1KOoASeQ6kBihdNfcOyVMIZBwjmIw60",
            "",
        ),
        (
            "github_token",
            "",
            "ghs_f8idwH8q4H9GdCGbjaLCY8EoSjRkGNypYUoT",
            "",
        ),
        (
            "github_token",
            "",
            "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",
            "",
        ),
        ("gitlab_token", "", "glpat-creV2k9QvUh6h_QvEZU4", ""),
        ("gitlab_token", "", "glrt-9L4zRX18xyejrR5NpNhg", ""),
        (
            "gitlab_token",
            "",
            "glptt-enznueBwnc0UySmBJUAbKY2PbWajf8g8EulHAT1D",
            "",
        ),
        (
            "slack_token",
            "",
            "xoxb-80116202744-8455798312465-I3FOBrHltC8soaxyQ81ozxO9",
            "",
        ),
        (
            "slack_token",
            "",
            "xoxp-41031504834-00222099535-149280398021-866d94740a140842a46b3c52157856a5",
            "",
        ),
        (
            "slack_webhook_url",
            "https://hooks.slack.com/services/",
            "TDD2HLY7E/B5P6UOOYITQ/KhtrNIS2pXFxF7w7B0IEMDF7",
            "",
        ),
        (
            "stripe_secret_key",
            "",
            "sk_live_QCmXnGvNCwqsKvexBADqM5jU",
            "",
        ),
        (
            "stripe_secret_key",
            "",
            "sk_test_byuM2pbaD91G6Z05d7cBVGDi",
            "",
        ),
        (
            "stripe_secret_key",
            "",
            "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",
            "",
        ),
        (
            "stripe_secret_key",
            "",
            "whsec_FwRKZ9rZ95tG3reecqMfVOpeJ7c7r5eT",
            "",
        ),
        (
            "anthropic_api_key",
            "",
            "sk-ant-api03-aG4xD9IvTlXrDCwGSZHmZ_NJiUHm33xAZuAqKQ2Nc7ZDIc6bb61i_Fawhs57AoUc9yBgTB2yhhC2rqB3zJE4rkdXaeGLyAA",
            "",
        ),
        (
            "openai_api_key",
            "",
            "sk-proj-mk-Rr2Uep_XCx-6-kDs_5EzTrwPm__6DWY9m-LbWpQRYYnhfaMI0xzHfC8Ul5LdqDJqSlQNAzXu4JdeDiHVm3gN5wIBCTpIGCRX2QjMyeOGmaPrwUrqaIkroPt3Ll_18ffqGsMv58w-SS3pA-qDszgo2qPQC",
            "",
        ),
        (
            "openai_api_key",
            "",
            "sk-t6j7bWXZOmsZkniopfEZWECRcwj80bPTrt6oJucmRvDDi507",
            "",
        ),
        (
            "openai_api_key",
            "",
            "sk-svcacct-WIHcQjsuIa4Xjn-llbPFnIoGHp3YguHf8xTTWI_91m8Apbu8eIyH8ZIz1L9C",
            "",
        ),
        (
            "huggingface_token",
            "",
            "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",
            "",
        ),
        (
            "huggingface_token",
            "",
            "hf_ZHmXuHfNl5KxPxSTmrHhHBJLl82LMRtaDN",
            "",
        ),
        (
            "groq_api_key",
            "",
            "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",
            "",
        ),
        (
            "replicate_api_token",
            "",
            "r8_Bn2Fed8kcpbcBTC2T9NC1xdLDwEa3zgYEqGr9",
            "",
        ),
        (
            "xai_api_key",
            "",
            "xai-wp0MwGufpeks4085ZqKmtzNPJ7qoRo4aQPvb9A5eOwtcn4wrGfcr5190l5C5TUTMzZKDXtBcBWqHr5gD",
            "",
        ),
        (
            "perplexity_api_key",
            "",
            "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",
            "",
        ),
        (
            "npm_token",
            "",
            "npm_wMEKUz13ta1QwcIKRPuTWOaBz0wexahhXzxj",
            "",
        ),
        (
            "sendgrid_api_key",
            "",
            "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",
            "",
        ),
        (
            "twilio_api_key",
            "",
            "SK27bed097af7e05c72a6554b7c34ddc2e",
            "",
        ),
        (
            "telegram_bot_token",
            "",
            "8412686625:AACU5-vI_xDN-tbNmBWIwdXr3CpLE7E8nwt",
            "",
        ),
        (
            "digitalocean_token",
            "",
            "dop_v1_0d00ce532840cdcda7a3168a6c2fd20ae721bfd16433b66d8e77e4f6357ad600",
            "",
        ),
        (
            "digitalocean_token",
            "",
            "doo_v1_8aa9212755dc977de01356e9587cd9a297dc401723f3feb37e0aae281aa61440",
            "",
        ),
        (
            "mailgun_api_key",
            "Mailgun sending key ",
            "key-ffc7ec090d7d3fdd49ff311309ae654d",
            "",
        ),
        ("square_token", "", "sq0atp-I2H87EZyOl2ff8Z2ucn19O", ""),
        (
            "square_token",
            "",
            "sq0csp-i_r2uSeVWzyDdPEgVOx-FQ9Vn9uSfKfJKOin1o_lb0c",
            "",
        ),
        (
            "square_token",
            "",
            "EAAA3pWyUxHQAIQaKbKHQ2w4FW5GLCIanL6lhJ5xwEWVkAvpBSZJnSBZKE4cxKFX",
            "",
        ),
        (
            "shopify_token",
            "",
            "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",
            "",
        ),
        (
            "shopify_token",
            "",
            "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",
            "",
        ),
        (
            "discord_webhook_url",
            "https://discord.com/api/webhooks/",
            "191997843561817995/gQQL4g8MrB5nFpqbZWrNnRV1u3Mo32hGSQ7dgo3VNAf9Nk0pCnR2eXuUVga8gZd1Zre2",
            "",
        ),
        (
            "discord_bot_token",
            "",
            "MTU1NDMwNjI5MzEyNjk1OTk2.zQrybW.tpcxL_kEgo4hIMlrQkrt76h_QKFU5UdUnYpkKy",
            "",
        ),
        (
            "databricks_token",
            "",
            "dapic109a258ff3d9a018c410d11f6c2d0f3",
            "",
        ),
        (
            "cloudflare_api_token",
            "Cloudflare (DNS edit) ",
            "8RngDt_TKa6DAxgtM6a2BIXgAXfNQT8yBkjhwdkk",
            "",
        ),
        (
            "pypi_token",
            "",
            "pypi-AgEIcHlwaS5vcmczVe25deQjoO6IxpqVvT9dgL7q9vo_TzsjlcvmD4fbah2JUf7BbqfQq-e2KfUFba424HnTUJ5pW4UOma0pqLZwd1nj1D_Dm5k5UikQe_66Yb1k8vtaD5W78D4",
            "",
        ),
        (
            "heroku_api_key",
            "",
            "HRKU-YbGt9tJvzwPpgZe7grB_UlCnML89IxbByU49QbI-KsYPzbsHruqe_fYh_JsB",
            "",
        ),
        (
            "heroku_api_key",
            "heroku auth token ",
            "4ecedd25-c149-7142-1931-646aa17ae62e",
            "",
        ),
        (
            "sentry_dsn",
            "https://",
            "1975929df559ede5def20a4eab385b6e",
            "@o4507.ingest.us.sentry.io/4507123",
        ),
        (
            "sentry_token",
            "",
            "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",
            "",
        ),
        (
            "vault_token",
            "",
            "hvs.-3ruxBk_ZttgBCU6jTwt7w5_6JgHPK_mZClRLmwly4fGUZmv9dbRcxjqkqkWg-tKkqeDYHVOciY7zLAseIiz84xmqh",
            "",
        ),
        (
            "vault_token",
            "",
            "hvb.HOi0el9B6LHZhqCM-9Urw7D5OBkj6gCpufMs-IAL8gFrhikMVnheujN6kKM9CpYuUC6C37AEQN1VvzpsUpnGQ8fDehnQGHcAgkLccuTIR35HhYja7AxS_ryuecfL0Qs0Hd",
            "",
        ),
        (
            "atlassian_api_token",
            "",
            "ATATT3EzLdqsQexyo-Vyz7WSLrdTSeagz40THgdsYecHZpxT73OneteLEresSiTCxupIighBS7Bd12jM0IrA1VrhX5AMgvqzNhh45kqmMs1iiNShXRJwmDVPiEmGngo6CqKk_Dma8ZGEU6HnI_92F_oZMvaNUFYwWRV6BZKt7EtEELpG5KknaFJ8EC=59B04C07",
            "",
        ),
        (
            "docker_token",
            "",
            "dckr_pat_59ZogIjQmjN7yC2XzxEeuxwUlRW",
            "",
        ),
        (
            "age_secret_key",
            "",
            "AGE-SECRET-KEY-1AKAGT4NFX3KU48TGRME76VQDDN9YJM4CH3UYMR2H4LQYKQDMPR45S83RN3",
            "",
        ),
        (
            "grafana_token",
            "",
            "glsa_MhkUTPGt8FTNCFAjYd5x5T5hYJ051I1Y_d3f985df",
            "",
        ),
        (
            "grafana_token",
            "",
            "glc_Q/X7Ql+cioys8VcGIcdEam46AITChpqR/H+m4lGHmRGeFTCQ0FlRtIHqHRLBMJJYMpWAunTBLtkXU7S8==",
            "",
        ),
        (
            "linear_api_key",
            "",
            "lin_api_Fo7mnF1llZYfyJcDSnB5jUD0xWx8kTjIspop79Zd",
            "",
        ),
        (
            "notion_token",
            "",
            "secret_wYckFwC1YtoWNSQONFfwiqpLXCN2ndJgVBg4lN4xgdJ",
            "",
        ),
        (
            "notion_token",
            "",
            "ntn_ZKPsSREupQyCxsOV48fR9pclLlG5GmtNNo4LUvkJHHx1F5",
            "",
        ),
        (
            "doppler_token",
            "",
            "dp.pt.n68VSgdfTYVa5pjSzCsmjk5fZIJEcEyXI13iLMShKLk",
            "",
        ),
        (
            "terraform_token",
            "",
            "B8EwHZLjFPCC26.atlasv1.PETcOvAuZI99J-9HPwzm0FyitFTxGRmPChcdcuH1DjRfXtMAEkrMHMGMVqq_RbApxK_",
            "",
        ),
        (
            "postman_api_key",
            "",
            "PMAK-c17f03a41d7efbf2ed7eca00-e28e8d5ed56eb20f46e166e01eadb547e0",
            "",
        ),
        ("newrelic_key", "", "NRAK-LUFWGOZT72ZWNNW1GPSAQVEB035", ""),
        (
            "newrelic_key",
            "",
            "NRII-nKoqM9Lg7XFi5iIteiiKyHfJ4UsKEwbT",
            "",
        ),
        (
            "jwt",
            "",
            "eyJhbGciOiAiSFMyNTYiLCAidHlwIjogIkpXVCJ9.eyJzdWIiOiAiNDgyMSIsICJuYW1lIjogIk1pcmEgSG9sbSIsICJpYXQiOiAxNzY0MDAwMDAwfQ.pdwpB4u3APP67oK3Shf-DzBqWYpYxJABJ3nxzcFy1Fg",
            "",
        ),
        (
            "url_password",
            "postgres://app_user:",
            "Vq7rT2pLx9mK",
            "@db.internal:5432/notes",
        ),
        (
            "url_password",
            "redis://:",
            "h8Kq2wZx5Lm3",
            "@cache.local:6379",
        ),
        // A word inside a password or a token does not make it a
        // placeholder: only a value of words alone can be one.
        (
            "url_password",
            "postgres://app:",
            "SuperSecret2024",
            "@db.internal:5432/prod",
        ),
        (
            "url_password",
            "postgres://app:",
            "MyPassword77",
            "@db.internal/prod",
        ),
        (
            "url_password",
            "https://deploy:",
            "Gh0stRider-token9",
            "@git.internal/repo.git",
        ),
        ("password_assignment", "password = ", "YourDog#2019!x", ""),
        (
            "secret_assignment",
            "token: ",
            "9fK2Lq8ZpXw4yourTmR7vB3nC",
            "",
        ),
        (
            "github_token",
            "",
            "ghp_kR7mQ2xLp9ZwB4tYvN8cH3jD6fG1sA5eUyour",
            "",
        ),
        (
            "url_password",
            "https://mira:",
            "w1nter%21Bay",
            "@git.example.net/repo.git",
        ),
        (
            "http_authorization",
            "Authorization: Bearer ",
            "qP/zI2adXGjx+shjt0Xn//ICxwPsSEvDAwTfeOXS",
            "",
        ),
        (
            "http_authorization",
            "Authorization: Basic ",
            "bWlyYTp3MW50ZXIhQmF5OTI=",
            "",
        ),
        (
            "http_authorization",
            "Authorization: Token ",
            "3fd629a9ee86428eb665655846e2cad03d88cd83",
            "",
        ),
        (
            "http_authorization",
            "Authorization: Basic ",
            "b3BzOkt4NyE=",
            "",
        ),
        (
            "http_cookie",
            "Cookie: ",
            "sessionid=zaj5l91ozckjn272iq401gl42656frx3; theme=dark",
            "",
        ),
        (
            "http_cookie",
            "Set-Cookie: session=",
            "reFVuoINfJvBFxv3Tr3XHU8OA5dIkW9MFe70DOLB",
            "; Path=/; HttpOnly",
        ),
        (
            "command_line_password",
            "mysql -u root -p",
            "S3cretPw",
            " notes",
        ),
        (
            "command_line_password",
            "curl -u admin:",
            "Vq7rT2pLx9",
            " https://api.internal/v1",
        ),
        (
            "command_line_password",
            "sshpass -p '",
            "h8Kq2wZx",
            "' ssh deploy@10.0.0.5",
        ),
        (
            "command_line_password",
            "restic --password ",
            "blue7Heron!",
            " backup",
        ),
        ("password_assignment", "password: ", "m4ple#Crane!92", ""),
        ("password_assignment", "DB_PASSWORD=", "Vq7!rT2@pLx9", ""),
        ("password_assignment", "\"passwd\": \"", "hK8$wq2Lz0", "\""),
        ("password_assignment", "pwd='", "s3Lk#94Qa", "'"),
        ("password_assignment", "password: ", "MyPassword!2024", ""),
        ("password_assignment", "DB_PASSWORD=", "$ecure#Pass1", ""),
        (
            "password_assignment",
            "password = \"",
            "correct horse battery staple",
            "\"",
        ),
        ("password_assignment", "passwd: ", "@dm1n!Pa55", ""),
        ("password_assignment", "root_pw=", "Zx9!k", ""),
        ("password_assignment", "**Password:** ", "Tr0ub4dor&3", ""),
        ("password_assignment", "wifi password: `", "k9#Lm2!q", "`"),
        ("password_assignment", "--password=", "(Kq9!x)7", ""),
        ("password_assignment", "password:: ", "Xq7vLm29Rt", ""),
        ("password_assignment", "[password:: ", "Wq7v#m29Rt", "]"),
        ("password_assignment", "Password — ", "Vq7vLm29Rt", ""),
        ("password_assignment", "password -> ", "Uq7vLm29Rt", ""),
        // Hostile round 8: qualifiers, a hyphen, typographic spaces,
        // strikethrough, plurals and other languages' words.
        (
            "password_assignment",
            "The password for the router: ",
            "Xq7vLm29Rt01",
            "",
        ),
        (
            "password_assignment",
            "Password for root: ",
            "Xq7vLm29Rt02",
            "",
        ),
        (
            "password_assignment",
            "password (prod): ",
            "Xq7vLm29Rt03",
            "",
        ),
        (
            "password_assignment",
            "password [prod]: ",
            "Xq7vLm29Rt04",
            "",
        ),
        ("password_assignment", "New password - ", "Xq7vLm29Rt05", ""),
        ("password_assignment", "password: ~~", "Xq7vLm29Rt06", "~~"),
        (
            "password_assignment",
            "password\u{a0}: ",
            "Xq7vLm29Rt07",
            "",
        ),
        (
            "password_assignment",
            "password\u{2002}= ",
            "Xq7vLm29Rt08",
            "",
        ),
        (
            "password_assignment",
            "Passwords: ",
            "Xq7vLm29Rt09",
            ", Yq7vLm29Rt10",
        ),
        ("password_assignment", "mot de passe : ", "Xq7vLm29Rt11", ""),
        ("password_assignment", "contraseña: ", "Xq7vLm29Rt12", ""),
        ("password_assignment", "senha: ", "Xq7vLm29Rt13", ""),
        ("password_assignment", "пароль: ", "Xq7vLm29Rt14", ""),
        ("password_assignment", "Пароль: ", "Xq7vLm29Rt15", ""),
        ("password_assignment", "パスワード: ", "Xq7vLm29Rt16", ""),
        ("password_assignment", "비밀번호: ", "Xq7vLm29Rt17", ""),
        ("password_assignment", "wachtwoord: ", "Xq7vLm29Rt18", ""),
        ("password_assignment", "hasło: ", "Xq7vLm29Rt19", ""),
        ("password_assignment", "lösenord: ", "Xq7vLm29Rt20", ""),
        ("password_assignment", "Kennwort: ", "Xq7vLm29Rt21", ""),
        // Hostile round 9.
        (
            "password_assignment",
            "password for the new office router: ",
            "Xq7vLm29Rt51",
            "",
        ),
        (
            "password_assignment",
            "password for \"wifi\": ",
            "Xq7vLm29Rt52",
            "",
        ),
        (
            "password_assignment",
            "password for [[Router]]: ",
            "Xq7vLm29Rt53",
            "",
        ),
        ("password_assignment", "password 2: ", "Xq7vLm29Rt54", ""),
        ("password_assignment", "password #2: ", "Xq7vLm29Rt55", ""),
        ("secret_assignment", "token (prod): ", "Xq7vLm29Rt56", ""),
        ("secret_assignment", "api key: ", "Xq7vLm29Rt57", ""),
        ("secret_assignment", "**token**: ", "Xq7vLm29Rt58", ""),
        ("secret_assignment", "token:: `", "Xq7vLm29Rt59", "`"),
        // Hostile round 9, what was left: localized qualifiers, more
        // languages, `bearer`.
        (
            "password_assignment",
            "Пароль от роутера: ",
            "Xq7vLm29Rt81",
            "",
        ),
        (
            "password_assignment",
            "contraseña del router: ",
            "Xq7vLm29Rt82",
            "",
        ),
        (
            "password_assignment",
            "Passwort für den Router: ",
            "Xq7vLm29Rt83",
            "",
        ),
        (
            "password_assignment",
            "mot de passe du routeur : ",
            "Xq7vLm29Rt84",
            "",
        ),
        (
            "password_assignment",
            "wachtwoord voor de router: ",
            "Xq7vLm29Rt85",
            "",
        ),
        ("password_assignment", "jelszó: ", "Xq7vLm29Rt86", ""),
        ("password_assignment", "κωδικός: ", "Xq7vLm29Rt87", ""),
        ("password_assignment", "كلمة المرور: ", "Xq7vLm29Rt88", ""),
        ("password_assignment", "şifre: ", "Xq7vLm29Rt89", ""),
        ("password_assignment", "MẬT KHẨU: ", "Xq7vLm29Rt90", ""),
        ("password_assignment", "parola: ", "Xq7vLm29Rt91", ""),
        ("password_assignment", "Лозинка: ", "Xq7vLm29Rt92", ""),
        ("secret_assignment", "bearer: ", "Xq7vLm29Rt93", ""),
        ("secret_assignment", "bearer:: ", "Xq7vLm29Rt94", ""),
        // Hostile round 10.
        (
            "password_statement",
            "La contraseña del router es ",
            "Xq7vLm29Rs01",
            ".",
        ),
        (
            "password_statement",
            "Das Passwort für den Router ist ",
            "Xq7vLm29Rs02",
            ".",
        ),
        ("password_statement", "Passwort lautet ", "Xq7vLm29Rs03", ""),
        (
            "password_statement",
            "la contraseña es: ",
            "Xq7vLm29Rs04",
            "",
        ),
        (
            "password_statement",
            "Le mot de passe est : ",
            "Xq7vLm29Rs15",
            "",
        ),
        ("password_assignment", "contraseñas: ", "Xq7vLm29Rs05", ""),
        ("password_assignment", "пароли: ", "Xq7vLm29Rs06", ""),
        ("password_assignment", "ŞİFRE: ", "Xq7vLm29Rs07", ""),
        (
            "password_assignment",
            "heslo k routeru: ",
            "Xq7vLm29Rs08",
            "",
        ),
        (
            "password_assignment",
            "κωδικός πρόσβασης: ",
            "Xq7vLm29Rs09",
            "",
        ),
        ("password_assignment", "رمز عبور: ", "Xq7vLm29Rs10", ""),
        ("password_assignment", "password: &p ", "Xq7vLm29Rs11", ""),
        ("secret_assignment", "token: !!str ", "Xq7vLm29Rs12", ""),
        ("secret_assignment", "bearer\u{a0}: ", "Xq7vLm29Rs13", ""),
        (
            "http_authorization",
            "Authorization: Bearer ",
            "Xq7vLm29Rs14",
            "",
        ),
        ("secret_assignment", "token (prod):: ", "Xq7vLm29Rt60", ""),
        (
            "password_element",
            "<password>",
            "Yq7vLm29Rt",
            "</password>",
        ),
        ("pin_assignment", "PIN: ", "582913", ""),
        ("pin_assignment", "pin_code=", "4071", ""),
        ("pin_assignment", "pin code: ", "4071", ""),
        ("pin_assignment", "PIN — ", "582913", ""),
        ("password_assignment", "password: ", "Zq7v Lm29Rt", ""),
        ("password_assignment", "wifi pw = ", "Kq9x x7!m Lz2", ""),
        ("password_statement", "the password is ", "Zq7v Lm29Rt", ""),
        (
            "password_element",
            "<password type=\"text\">",
            "Kq9!x7z",
            "</password>",
        ),
        (
            "password_statement",
            "the admin password is ",
            "Kx82!mq7",
            "",
        ),
        (
            "password_statement",
            "The password for the db is ",
            "Hb5#tq2Z",
            "",
        ),
        ("password_statement", "密码：", "Hx7k29pq", ""),
        ("password_statement", "数据库口令是 ", "ZQ83mfw2", ""),
        ("password_statement", "密钥: ", "w8Fq2LmZ9", ""),
        // Shorter than a key's entropy test judges, under a key that
        // names a secret.
        ("secret_assignment", "secret: ", "Lc6^oI47aSd*Ww4", ""),
        ("secret_assignment", "api_key: ", "Kq2!mZ84xWv#Lp", ""),
        ("secret_assignment", "client_token=", "Rm2#eD39fG", ""),
        // Dataview's inline fields (hostile round 8).
        ("secret_assignment", "token:: ", "Xq7vLm29RtD1", ""),
        (
            "secret_assignment",
            "api_key:: ",
            "Xq7vLm29RtD2abcdefXYZ123",
            "",
        ),
        ("secret_assignment", "client_secret:: ", "Xq7vLm29RtD3", ""),
        ("secret_assignment", "credentials:: ", "Xq7vLm29RtD4", ""),
        ("secret_assignment", "access_token:: ", "Xq7vLm29RtD5", ""),
        ("secret_assignment", "github token:: ", "Xq7vLm29RtD6", ""),
        ("secret_assignment", "[token:: ", "Xq7vLm29RtD7", "]"),
        ("secret_assignment", "token:: \"", "Xq7vLm29RtD8", "\""),
        (
            "secret_assignment",
            "api_key = \"",
            "X61PLIUDKGJ3478Ns1IM",
            "\"",
        ),
        (
            "secret_assignment",
            "export AUTH_TOKEN=",
            "WQyBQhuIVAAL6XU-sI_Keh0K",
            "",
        ),
        (
            "secret_assignment",
            "\"client_secret\": \"",
            "e8c1e8503040a7b2a4fe1e9cbec2a265",
            "\"",
        ),
        (
            "secret_assignment",
            "SIGNING_KEY: ",
            "iliIusX2bzg+YJY1nlXsSDqD+o1g0ZCw7+KAfQW24a2DLwzdXN34VOicJ+f8bQB3",
            "",
        ),
        ("email", "", "mira.holm@holm-family.org", ""),
        ("email", "", "ops+alerts@notes-lab.co.uk", ""),
        ("phone", "", "+49 30 1234567", ""),
        ("phone", "", "+1 (415) 555-0132", ""),
        ("phone", "", "+44 20 7946 0958", ""),
        ("phone", "", "(415) 555-0132", ""),
        ("phone", "", "030 12345678", ""),
        ("phone", "", "06 12 34 56 78", ""),
        ("phone", "", "415-555-0132", ""),
    ];

    /// (name, text with `{}` where the sample goes); a sample that spans lines skips the one-line ones.
    const CONTEXTS: &[(&str, &str, bool)] = &[
        ("alone", "{}", true),
        (
            "prose",
            "Here is the one we rotated: {} and nothing else.",
            true,
        ),
        ("line start", "{}\nThe next line of the note.", true),
        ("line end", "The first line of the note\nand then {}", true),
        ("double quotes", "The value \"{}\" was pasted.", true),
        ("single quotes", "The value '{}' was pasted.", true),
        (
            "frontmatter",
            "---\ntitle: Deploy notes\nnote: {}\ntags: [ops]\n---\n# Deploy\n",
            true,
        ),
        (
            "table cell",
            "| service | value |\n|---|---|\n| api | {} |\n",
            false,
        ),
        ("cjk", "部署说明：{}，请勿外传。", true),
    ];

    fn planted(before: &str, secret: &str, after: &str, context: &str) -> (String, Range<usize>) {
        let (head, tail) = context.split_once("{}").expect("context has a slot");
        let start = head.len() + before.len();
        let text = format!("{head}{before}{secret}{after}{tail}");
        (text, start..start + secret.len())
    }

    #[test]
    fn kinds_list_every_detector_in_order() {
        let kinds: Vec<&str> = DETECTORS.iter().map(|detector| detector.kind).collect();
        assert_eq!(kinds, KINDS);
        assert!(KINDS.len() >= 15);
    }

    #[test]
    fn every_kind_has_a_sample() {
        for kind in KINDS {
            assert!(
                SAMPLES.iter().any(|(sample_kind, ..)| sample_kind == kind),
                "no sample for {kind}"
            );
        }
    }

    #[test]
    fn every_sample_is_found_exactly_in_every_context() {
        let mut misses = Vec::new();
        for (kind, before, secret, after) in SAMPLES {
            for (context_name, context, multi_line_ok) in CONTEXTS {
                if secret.contains('\n') && !multi_line_ok {
                    continue;
                }
                let (text, range) = planted(before, secret, after, context);
                let findings = find(&text, &PERSONAL);
                let expected = Finding {
                    range: range.clone(),
                    kind,
                };
                if !findings.contains(&expected) {
                    misses.push(format!(
                        "{kind} in {context_name}: {secret:?} -> {findings:?}"
                    ));
                }
            }
        }
        assert!(misses.is_empty(), "missed:\n{}", misses.join("\n"));
    }

    #[test]
    fn long_values_are_found_whole() {
        // A bearer token past the old 2,000-character bound, a quoted value
        // past the old 300: both were missed whole.
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut state = 0x2545_f491_u32;
        let token: String = (0..2500)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                char::from(alphabet[(state >> 24) as usize % alphabet.len()])
            })
            .collect();
        let quoted = format!("{}-{}", &token[..200], &token[300..500]);
        for (text, secret) in [
            (
                format!("Authorization: Bearer {token} then"),
                token.as_str(),
            ),
            (format!("api_key = \"{quoted}\"\n"), quoted.as_str()),
        ] {
            let found = find(&text, &DetectorOptions::default());
            let values: Vec<&str> = found.iter().map(|f| &text[f.range.clone()]).collect();
            assert!(values == [secret], "{} findings", values.len());
        }
    }

    #[test]
    fn personal_data_is_found_only_when_asked() {
        let text = "Write to mira.holm@holm-family.org or call +49 30 1234567.";
        assert_eq!(find(text, &DetectorOptions::default()), vec![]);
        let kinds: Vec<&str> = find(text, &PERSONAL).iter().map(|f| f.kind).collect();
        assert_eq!(kinds, ["email", "phone"]);
    }

    #[test]
    fn negatives_are_not_findings() {
        let negatives = [
            "Fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8 last week.",
            "See 9fceb02 and a1b2c3d4e5f6 for the revert.",
            "The id is 123e4567-e89b-12d3-a456-426614174000 in the table.",
            "![chart](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
            "The ratio $\\frac{a}{b}$ and \\begin{equation} x^2 + y^2 = z^2 \\end{equation}",
            "分布式系统中的一致性协议，例如 Raft 和 Paxos，保证多数派达成共识。",
            "Use ConcurrentHashMapBuilderFactory with AbstractSingletonProxyFactoryBeanConfiguration.",
            "Docs live at https://docs.example.com:8443/guide?page=2#auth and http://localhost:3000/api.",
            "password: use the one in the vault",
            "The password for the router: see the label on its back",
            "password (optional): none",
            "Test pass - fail",
            "Passwort-Hinweis: Hund",
            "password [prod]: ask Mira",
            "contraseña: la de siempre",
            "пароль: спросите у Миры",
            "Пароль от роутера: спросите у Миры",
            "contraseña del router: en la etiqueta",
            "parola: ciao",
            "clave: Sol",
            "heslo: Slovo",
            "The password is stored in 1Password, ask Mira.",
            "Password: see the team manager",
            "Colours: #ff8800, #1e90ff and #abc.",
            "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b4c8a08f4b24f3e1c4f6a8b9c",
            "| key | value |\n|---|---|\n| timeout | 30 |\n| retries | 5 |",
            "Call get_token() then refresh_api_key(session) before parse_secret_value.",
            "Upgrade from v1.2.3 to 2.10.0-rc.1 (build 2024.11.05).",
            "ISBN 978-3-16-148410-0 and ISBN 0-306-40615-2.",
            "Meeting on 2024-11-05 at 14:30, then 05.12.2024 and 12/31/2023 09:15:00.",
            "password: ${DB_PASSWORD}",
            "api_key: <your-token>",
            "token = \"xxxxxxxxxxxxxxxxxxxxxxxx\"",
            "secret: '****************'",
            "PASSWORD=changeme",
            "token = os.environ[\"API_TOKEN\"]",
            "tokenizer: o200k_base",
            "token: ERC-20 on mainnet",
            "secret: see the team vault",
            "api_key: YOUR_API_KEY_HERE",
            "key: Cmaj7 chord",
            "tokens: 1500 per call",
            "token: cl100k_base",
            "next_token: page2_cursor",
            "existingSecret: postgres-creds1",
            "token: USDC-ERC20",
            "max_tokens: 4096",
            "The p-value was 0.001 (95% CI 0.12-0.45, n = 1024).",
            "pk_live_51Hb2qQ7kBCvZnZQP5GwI1pMCIuHLt5Et9pFBY2CK08Z8CPWT is the publishable key.",
            "An identifier sk-learn-style-names-are-fine-here in prose.",
            "  - keyutils=1.6.1=h166bdaf_0\n  - fmt==11.1.4=h07f6e7f_1",
            "A total of 576 900 (330 000-701 200) years of life were lost.",
            "Mail you@example.com or admin@wiki.test for access.",
            "The risk-adjusted-return-on-capital-model was used.",
        ];
        for text in negatives {
            assert_eq!(find(text, &PERSONAL), vec![], "false positive in {text:?}");
        }
    }

    #[test]
    fn a_struck_password_and_the_one_after_it_are_both_found() {
        let text = "New password: ~~Oq7vLm29Rt70~~ Nq7vLm29Rt71 (since May)";
        let found = find(text, &DetectorOptions::default());
        let values: Vec<&str> = found.iter().map(|f| &text[f.range.clone()]).collect();
        assert_eq!(values, ["Oq7vLm29Rt70", "Nq7vLm29Rt71"]);
        let struck_only = "password: ~~Oq7vLm29Rt70~~\nnext line";
        let found = find(struck_only, &DetectorOptions::default());
        assert_eq!(found.len(), 1);
    }

    #[test]
    fn the_items_listed_after_a_secret_that_read_as_secrets_are_found() {
        for (text, expected) in [
            (
                "Passwords: Xq7vLm29Rt72, Yq7vLm29Rt73, Zq7vLm29Rt74",
                &["Xq7vLm29Rt72", "Yq7vLm29Rt73", "Zq7vLm29Rt74"][..],
            ),
            (
                "token:: Xq7vLm29Rt75,Yq7vLm29Rt76",
                &["Xq7vLm29Rt75", "Yq7vLm29Rt76"][..],
            ),
            (
                "password: Xq7vLm29Rt77, see the wiki",
                &["Xq7vLm29Rt77"][..],
            ),
            (
                "token: Xq7vLm29Rt78, expires tomorrow",
                &["Xq7vLm29Rt78"][..],
            ),
            (
                "passwords: \"Xq7vLm29Rt79\"; `Yq7vLm29Rt80` and Zq7vLm29Rt81、Wq7vLm29Rt82",
                &[
                    "Xq7vLm29Rt79",
                    "Yq7vLm29Rt80",
                    "Zq7vLm29Rt81",
                    "Wq7vLm29Rt82",
                ][..],
            ),
            (
                "passwords: Xq7vLm29Rt87, Yq7vLm29Rt88, and Zq7vLm29Rt89",
                &["Xq7vLm29Rt87", "Yq7vLm29Rt88", "Zq7vLm29Rt89"][..],
            ),
            (
                "[passwords:: Xq7vLm29Rt83, Yq7vLm29Rt84]",
                &["Xq7vLm29Rt83", "Yq7vLm29Rt84"][..],
            ),
            (
                "api keys: Xq7vLm29Rt85, Yq7vLm29Rt86",
                &["Xq7vLm29Rt85", "Yq7vLm29Rt86"][..],
            ),
            // A label before a value: what it was, or where it is used.
            (
                "password: Xq7vLm29Rt90 (was Yq7vLm29Rt91)",
                &["Xq7vLm29Rt90", "Yq7vLm29Rt91"][..],
            ),
            (
                "password: Xq7vLm29Rt92, old: Yq7vLm29Rt93 / previously Zq7vLm29Rt94",
                &["Xq7vLm29Rt92", "Yq7vLm29Rt93", "Zq7vLm29Rt94"][..],
            ),
            (
                "password: Xq7vLm29Rt95 → Yq7vLm29Rt96 — Zq7vLm29Rt97 vs Wq7vLm29Rt98",
                &[
                    "Xq7vLm29Rt95",
                    "Yq7vLm29Rt96",
                    "Zq7vLm29Rt97",
                    "Wq7vLm29Rt98",
                ][..],
            ),
            (
                "passwords: prod Xq7vLm29Rt99, staging Yq7vLm29Rt00",
                &["Xq7vLm29Rt99", "Yq7vLm29Rt00"][..],
            ),
            // Blanks alone separate two values of one shape.
            (
                "token:: Xq7vLm29Rt01Ab Yq7vLm29Rt02Ab\tZq7vLm29Rt03Ab",
                &["Xq7vLm29Rt01Ab", "Yq7vLm29Rt02Ab", "Zq7vLm29Rt03Ab"][..],
            ),
            (
                "PASSWORD=Xq7vLm29Rt04 mysql:8.0 --name db",
                &["Xq7vLm29Rt04"][..],
            ),
            ("password: Xq7vLm29Rt05 (old one)", &["Xq7vLm29Rt05"][..]),
            ("passwords: prod is in Bitwarden", &[][..]),
        ] {
            let found = find(text, &DetectorOptions::default());
            let values: Vec<&str> = found.iter().map(|f| &text[f.range.clone()]).collect();
            assert_eq!(values, expected, "{text}");
        }
    }

    #[test]
    fn a_token_glued_to_a_word_or_number_is_found() {
        let token = "ghp_kR7mQ2xLp9ZwB4tYvN8cH3jD6fG1sA5eUyour";
        for before in ["x", "1", "#tag", "zebra eight x"] {
            let text = format!("{before}{token} rest");
            let found = find(&text, &DetectorOptions::default());
            let values: Vec<&str> = found.iter().map(|f| &text[f.range.clone()]).collect();
            assert_eq!(values, [token], "{text}");
        }
    }

    #[test]
    fn redact_replaces_only_the_secret() {
        let text = "Connect with postgres://app:Vq7rT2pLx9mK@db.internal/notes and\nexport GITHUB_TOKEN=ghp_XOYTvNhZMcqXdocw2zvHsLOL6uuxAPJ7OyWa # rotate monthly\n";
        let (redacted, findings) = redact(text, &DetectorOptions::default());
        assert_eq!(
            redacted,
            "Connect with postgres://app:[REDACTED:url_password]@db.internal/notes and\nexport GITHUB_TOKEN=[REDACTED:github_token] # rotate monthly\n"
        );
        assert_eq!(&text[findings[0].range.clone()], "Vq7rT2pLx9mK");
        assert_eq!(
            &text[findings[1].range.clone()],
            "ghp_XOYTvNhZMcqXdocw2zvHsLOL6uuxAPJ7OyWa"
        );
    }

    #[test]
    fn redact_removes_a_whole_private_key_block() {
        let text = "Key below.\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEqP\n-----END OPENSSH PRIVATE KEY-----\nDone: 密钥已轮换。";
        let (redacted, _) = redact(text, &DetectorOptions::default());
        assert_eq!(
            redacted,
            "Key below.\n[REDACTED:private_key]\nDone: 密钥已轮换。"
        );
    }

    #[test]
    fn a_private_key_without_its_end_line_is_redacted_to_the_last_key_line() {
        let text = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAiliIusX2bzg\nad68OVS+Lr81fsljsQQBu8\n\nThe rest was cut off.";
        let (redacted, _) = redact(text, &DetectorOptions::default());
        assert_eq!(redacted, "[REDACTED:private_key]\n\nThe rest was cut off.");
    }

    #[test]
    fn the_specific_kind_names_a_value_that_an_assignment_also_matches() {
        let text = "OPENAI_API_KEY=\"sk-t6j7bWXZOmsZkniopfEZWECRcwj80bPTrt6oJucmRvDDi507\"";
        let (redacted, _) = redact(text, &DetectorOptions::default());
        assert_eq!(redacted, "OPENAI_API_KEY=\"[REDACTED:openai_api_key]\"");
    }

    fn redacted(text: &str) -> String {
        redact(text, &DetectorOptions::default()).0
    }

    #[test]
    fn a_key_naming_what_the_password_opens_is_read_as_a_password_key() {
        let secret = "Xq7vLm29";
        for key in [
            "password wifi:",
            "Passwort WLAN:",
            "contraseña wifi:",
            "- salasana reitittimeen:",
            "jelszó a routerhez:",
            "kata sandi router:",
            "mật khẩu wifi:",
            "Mật khẩu đăng nhập:",
            "كلمة المرور للراوتر:",
            "סיסמה לראוטר:",
            "รหัสผ่าน wifi:",
            "パスワード（ルーター）：",
            "密码（路由器）：",
            "密码 (路由器):",
            "Пароль от роутера -",
            "Password 🔑:",
            "**password** 🔐:",
            "psk:",
            "wpa_psk =",
            "WLAN key:",
            "wifi key:",
            "creds:",
            "token_value:",
            "note: password",
            "use header Bearer",
            "Hasło to",
        ] {
            let line = format!("{key} {secret}");
            assert!(!redacted(&line).contains(secret), "{line}");
        }
        // Words about the password, a key inside a sentence, a plain value.
        for kept in [
            "password manager: Xq7vLm29",
            "password strength: Xq7vLm29",
            "Password rotation policy: Xq7vLm29",
            "I changed the password wifi: Xq7vLm29",
            "password wifi: later",
            "password wifi: 12345678",
            "the password Hello is weak",
            "send the password to Xavier",
            "password hashing with Argon2id",
            "Bearer tokens expire",
        ] {
            assert_eq!(redacted(kept), kept);
        }
    }

    #[test]
    fn passwords_are_judged_on_the_whole_value() {
        // Each of these leaked before: a word like `password` inside the value,
        // a leading `$ ! @ & * ( [ { #`, spaces in quotes, letters only, fewer
        // than six characters, a CLI flag, Chinese, a sentence, a short Basic
        // credential, `Token`, cookies.
        let cases = [
            (
                "password: MyPassword!2024",
                "password: [REDACTED:password_assignment]",
            ),
            (
                "SECRET_TOKEN_PASSWORD=tokenSecret9!",
                "SECRET_TOKEN_PASSWORD=[REDACTED:password_assignment]",
            ),
            (
                "DB_PASSWORD=$3cr3t!x",
                "DB_PASSWORD=[REDACTED:password_assignment]",
            ),
            (
                "password: !Secure#2024",
                "password: [REDACTED:password_assignment]",
            ),
            (
                "password: @dm1n-Pa55",
                "password: [REDACTED:password_assignment]",
            ),
            (
                "password: &7hX!q2",
                "password: [REDACTED:password_assignment]",
            ),
            (
                "password: *9kLm#2",
                "password: [REDACTED:password_assignment]",
            ),
            (
                "password: (Kq9!x)7",
                "password: [REDACTED:password_assignment]",
            ),
            (
                "password: [Kq9!x7",
                "password: [REDACTED:password_assignment]",
            ),
            (
                "password: {Kq9!x7",
                "password: [REDACTED:password_assignment]",
            ),
            (
                "password: #Kq9!x7",
                "password: [REDACTED:password_assignment]",
            ),
            (
                "password = \"correct horse battery staple\"",
                "password = \"[REDACTED:password_assignment]\"",
            ),
            (
                "password: sunshine",
                "password: [REDACTED:password_assignment]",
            ),
            (
                "wifi_password: Xk9!",
                "wifi_password: [REDACTED:password_assignment]",
            ),
            (
                "pin_password=4821",
                "pin_password=[REDACTED:password_assignment]",
            ),
            (
                "Password: ==Xq7pLm29zTa7==",
                "Password: ==[REDACTED:password_assignment]==",
            ),
            (
                "`password`: Xq7pLm29zT11",
                "`password`: [REDACTED:password_assignment]",
            ),
            (
                "Password: “Xq7pLm29zT11” and «Xq7pLm29zT22»",
                "Password: “[REDACTED:password_assignment]” and «Xq7pLm29zT22»",
            ),
            (
                "| User | admin |\n| Password | Xq7pLm29zTa9 |\n",
                "| User | admin |\n| Password | [REDACTED:password_assignment] |\n",
            ),
            (
                "Password: Xq7pLm29zT05. Username: admin.",
                "Password: [REDACTED:password_assignment]. Username: admin.",
            ),
            (
                "(password: Xq7pLm29zT13) and Password: Xq7pLm29zT16...",
                "(password: [REDACTED:password_assignment]) and Password: [REDACTED:password_assignment]...",
            ),
            (
                "client_secret: Xq7pLm29zT01abc.",
                "client_secret: [REDACTED:secret_assignment].",
            ),
            (
                "_ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8_ and __sk_live_NqVwYS81VP7Hb1DX8pPd5khx__",
                "_[REDACTED:github_token]_ and __[REDACTED:stripe_secret_key]__",
            ),
            (
                "password: Zq7v Lm29Rt for the db",
                "password: [REDACTED:password_assignment] for the db",
            ),
            (
                "Password: Xk9# !q2 Lm29. Then log in.",
                "Password: [REDACTED:password_assignment]. Then log in.",
            ),
            (
                "| wifi | password: Zq7v Lm29Rt | guest |",
                "| wifi | password: [REDACTED:password_assignment] | guest |",
            ),
            (
                "<Password type=\"text\">Kq9!x7z</Password>",
                "<Password type=\"text\">[REDACTED:password_element]</Password>",
            ),
            (
                "docker run -e MYSQL_ROOT_PASSWORD=123456 mysql:8.0",
                "docker run -e MYSQL_ROOT_PASSWORD=[REDACTED:password_assignment] mysql:8.0",
            ),
            (
                "- **Password:** hunter2",
                "- **Password:** [REDACTED:password_assignment]",
            ),
            (
                "Password：Zq8!mx",
                "Password：[REDACTED:password_assignment]",
            ),
            (
                "curl -u admin:S3cretPw https://api.internal/v1",
                "curl -u admin:[REDACTED:command_line_password] https://api.internal/v1",
            ),
            ("mysql -pX7k", "mysql -p[REDACTED:command_line_password]"),
            (
                "curl -u admin:p@ss-W0rd https://api.internal",
                "curl -u admin:[REDACTED:command_line_password] https://api.internal",
            ),
            (
                "password: Xy-ab3c",
                "password: [REDACTED:password_assignment]",
            ),
            (
                "mysql -u root -pS3cret notes",
                "mysql -u root -p[REDACTED:command_line_password] notes",
            ),
            (
                "sshpass -p 'h8Kq2wZx' ssh deploy@host",
                "sshpass -p '[REDACTED:command_line_password]' ssh deploy@host",
            ),
            (
                "--password=S3cret9",
                "--password=[REDACTED:password_assignment]",
            ),
            (
                "borg --passphrase Hx7!kq2 init",
                "borg --passphrase [REDACTED:command_line_password] init",
            ),
            ("密码：Hx7k29pq", "密码：[REDACTED:password_statement]"),
            ("密码: admin", "密码: [REDACTED:password_statement]"),
            (
                "服务器的密码是 abcd1234。",
                "服务器的密码是 [REDACTED:password_statement]。",
            ),
            ("口令为：Kq9x!2", "口令为：[REDACTED:password_statement]"),
            ("密钥=W8fQ2lmZ", "密钥=[REDACTED:password_statement]"),
            (
                "the admin password is Kx82!mq7.",
                "the admin password is [REDACTED:password_statement].",
            ),
            (
                "The password for the db is iS~yJMVD0.",
                "The password for the db is [REDACTED:password_statement].",
            ),
            (
                "The password for the db is Hb5#tq2Z, ask Mira.",
                "The password for the db is [REDACTED:password_statement], ask Mira.",
            ),
            (
                "the wifi password is \"sunshine\"",
                "the wifi password is \"[REDACTED:password_statement]\"",
            ),
            (
                "the password was changed to Tr0ub4dor",
                "the password was changed to [REDACTED:password_statement]",
            ),
            (
                "Authorization: Basic b3BzOkt4NyE=",
                "Authorization: Basic [REDACTED:http_authorization]",
            ),
            (
                "Authorization: Token 3fd629a9ee86428eb665",
                "Authorization: Token [REDACTED:http_authorization]",
            ),
            (
                "Cookie: sessionid=zaj5l91ozckjn272iq401gl42656frx3",
                "Cookie: [REDACTED:http_cookie]",
            ),
            (
                "Set-Cookie: session=reFVuoINfJvBFxv3Tr3X; Path=/; HttpOnly",
                "Set-Cookie: session=[REDACTED:http_cookie]; Path=/; HttpOnly",
            ),
        ];
        let mut wrong = Vec::new();
        for (text, expected) in cases {
            let got = redacted(text);
            if got != expected {
                wrong.push(format!(
                    "{text:?}\n  got      {got:?}\n  expected {expected:?}"
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn placeholders_prose_and_code_about_passwords_are_kept() {
        let kept = [
            "password: changeme",
            "password: <password>",
            "password: <your-db-password>",
            "password: ${DB_PASSWORD}",
            "password: $DB_PASSWORD",
            "password: $password",
            "password: your_password",
            "password: YOUR_PASSWORD_HERE",
            "password: xxxx",
            "password: ****",
            "password: password",
            "password: secret",
            "password: none",
            "password: true",
            "password: os.environ[\"DB_PASSWORD\"]",
            "password = os.getenv(\"DB_PASSWORD\")",
            "password: \"{{ vault_db_password }}\"",
            "password: *db_password",
            "password: !vault |",
            "password: DB_PASSWORD",
            "password: \"Enter your password\"",
            "password: \"The password of the service user\"",
            "the password is stored in the vault",
            "The password is incorrect.",
            "password: see 1Password",
            "Password: required",
            "password: stored in the vault",
            "pin: 2024-05-01",
            "PIN 1234-5678-9012 is the card's number, pin: 12:30",
            "<pwd>/home/user</pwd>",
            "<pwd>~/notes/work</pwd>",
            "password = get_password()",
            "password=args.password",
            "password = self.db_password",
            "password = this.dbPassword",
            "passwordless: enabled",
            "passenger: Alice123",
            "PASSENGER=Alice99",
            "Pass: Fail",
            "pub password: Option<String>,",
            "password: Optional[str] = None",
            "pub password: SecretString,",
            "password: !!str",
            "The password is Argon2-hashed.",
            "The password is SHA256 hashed",
            "  --password TEXT",
            "pub log_passwd: __u32,",
            "pub pw_uid: crate::uid_t,",
            "fn md5_hash(username: &[u8], password: &[u8]) -> String {",
            "let passwd = unsafe {",
            "    let password = config\n        .get_password()",
            "UserPass = 0x02,",
            "pub const INVALID_PASSWORD: SqlState = SqlState(Inner::E28P01);",
            "pub type HttpPasswordCB = Option<",
            "let pwd_verify = &derived_key[derived_key_len - 2..];",
            "password: u.arbitrary::<&str>()?,",
            "/// The password is `&[u8]` and not `&str`.",
            "StartupWMClass=vscodium",
            "password: db-pass",
            "password_min_length: 12",
            "password_file: /run/secrets/db",
            "PASSWORD_HASH=$2b$12$Kq9x",
            "Use the --password option to pass it.",
            "mysql -u root -p notes",
            "mysql -u root -p$MYSQL_PWD notes",
            "curl -u $USER:$API_TOKEN https://api.internal",
            "密钥：见附件",
            "密钥: AES256",
            "Authorization: Basic dXNlcjo=",
            "Authorization: Bearer $TOKEN",
            "Cookie: theme=dark; lang=en",
        ];
        for text in kept {
            assert_eq!(redacted(text), text, "redacted in {text:?}");
        }
    }

    #[test]
    fn a_value_stops_before_a_comment_marker() {
        for (text, expected) in [
            (
                "password: S3cret!x%%rotate on Monday%%",
                "password: [REDACTED:password_assignment]%%rotate on Monday%%",
            ),
            (
                "password=S3cret!x<!-- old one -->",
                "password=[REDACTED:password_assignment]<!-- old one -->",
            ),
            (
                "<!-- password=S3cret!x-->",
                "<!-- password=[REDACTED:password_assignment]-->",
            ),
            (
                "api_key=X61PLIUDKGJ3478Ns1IM%%private%%",
                "api_key=[REDACTED:secret_assignment]%%private%%",
            ),
        ] {
            assert_eq!(redacted(text), expected);
        }
    }

    #[test]
    fn a_cut_off_key_in_frontmatter_does_not_take_the_next_property() {
        let text = "---\nssh_key: -----BEGIN OPENSSH PRIVATE KEY-----\nprivate: true\ntags: [ops]\n---\nBody.";
        assert_eq!(
            redacted(text),
            "---\nssh_key: [REDACTED:private_key]\nprivate: true\ntags: [ops]\n---\nBody."
        );
        // After the first line of key material, a header-shaped line ends the block too.
        let text = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAiliIusX2bzg\nComment: not part of it\n";
        assert_eq!(
            redacted(text),
            "[REDACTED:private_key]\nComment: not part of it\n"
        );
        // Headers straight after the BEGIN line, and the blank line after them, are part of it.
        let text = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,5E2F\n\nMIIEowIBAAKCAQEAiliIusX2bzg\n\nAfter.";
        assert_eq!(redacted(text), "[REDACTED:private_key]\n\nAfter.");
        let text =
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\nThe rest was cut off.";
        assert_eq!(
            redacted(text),
            "[REDACTED:private_key]\n\nThe rest was cut off."
        );
    }

    #[test]
    fn an_indented_key_without_its_end_line_is_redacted_to_its_last_line() {
        let text = "deploy:\n  key: |\n    -----BEGIN OPENSSH PRIVATE KEY-----\n    b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEqP\n    SEvDAwTfeOXS==\n  user: deploy\n";
        assert_eq!(
            redacted(text),
            "deploy:\n  key: |\n    [REDACTED:private_key]\n  user: deploy\n"
        );
        let text = "> -----BEGIN EC PRIVATE KEY-----\n> MHcCAQEEIGx0Q7kBCvZnZQP5GwI1pMCIuHLt5Et9\n> pFBY2CK08Z8CoAoGCCqGSM49\n\nQuoted above.";
        assert_eq!(redacted(text), "> [REDACTED:private_key]\n\nQuoted above.");
    }

    #[test]
    fn a_putty_key_is_redacted_to_its_mac() {
        let text = "Saved as id.ppk:\n\nPuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: rsa-key-20251201\nPublic-Lines: 1\nAAAAB3NzaC1yc2EAAAABJQAAAIEAhZ\nPrivate-Lines: 2\nAAAAgBkGMX2LqS8r0q4hN2pQz\nL7vK3mW9xT1yF5cE8bJ2nA==\nPrivate-MAC: 9c1f0e2ab47d83e5\nDone.";
        assert_eq!(
            redacted(text),
            "Saved as id.ppk:\n\n[REDACTED:private_key]\nDone."
        );
        // Cut off before its MAC: to the last private line.
        let cut = "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 1\nAAAAC3NzaC1lZDI1NTE5AAAAIK\nPrivate-Lines: 1\nAAAAIBbX9q2Lm7Kp\nThe rest is missing.";
        assert_eq!(
            redacted(cut),
            "[REDACTED:private_key]\nThe rest is missing."
        );
        // Naming the format is not a key.
        let prose = "PuTTY-User-Key-File-3: ssh-ed25519 is the first line of a .ppk file.\nEncryption: none";
        assert_eq!(redacted(prose), prose);
    }

    #[test]
    fn provider_formats_that_need_their_context_are_not_found_without_it() {
        let kept = [
            // 32 hex after `key-` without the word Mailgun: a cache key.
            "cache key-ffc7ec090d7d3fdd49ff311309ae654d expired",
            // A UUID is an id unless it follows Heroku and a credential word.
            "note id 4ecedd25-c149-7142-1931-646aa17ae62e",
            "heroku app id 4ecedd25-c149-7142-1931-646aa17ae62e",
            // A commit id near the word Cloudflare.
            "cloudflare/workers-sdk at 9fceb02d0ae598e95dc970b74767f19372d61af8",
            // Three dotted parts whose first is not a user id in base64.
            "MTxhello_world_this_is_it.abcdef.ghijklmnopqrstuvwxyz0123456789A",
        ];
        for text in kept {
            assert_eq!(find(text, &PERSONAL), vec![], "false positive in {text:?}");
        }
    }

    #[test]
    fn mask_shows_at_most_four_characters() {
        assert_eq!(mask("ghp_XOYTvNhZMcqXdocw2zvHsLOL6uuxAPJ7OyWa"), "ghp_…");
        assert_eq!(mask("s3Lk#94Qa"), "s3…");
        assert_eq!(mask("abc"), "…");
        assert_eq!(mask("密钥密钥密钥密钥"), "密钥…");
    }

    fn assert_well_formed(text: &str, findings: &[Finding]) {
        let mut previous_end = 0;
        for finding in findings {
            assert!(
                finding.range.start >= previous_end,
                "sorted, non-overlapping"
            );
            assert!(finding.range.start < finding.range.end);
            assert!(text.is_char_boundary(finding.range.start));
            assert!(text.is_char_boundary(finding.range.end));
            assert!(KINDS.contains(&finding.kind));
            previous_end = finding.range.end;
        }
    }

    #[test]
    fn find_handles_a_huge_text_with_many_candidates() {
        let unit = "password=Vq7!rT2@pLx9 sk- AKIA -----BEGIN RSA PRIVATE KEY----- eyJ 中文 +49 ";
        let text = unit.repeat(20_000);
        let findings = find(&text, &PERSONAL);
        assert_well_formed(&text, &findings);
        assert_eq!(
            findings
                .iter()
                .filter(|f| f.kind == "password_assignment")
                .count(),
            20_000
        );
    }

    #[test]
    fn many_candidates_on_one_line_or_in_quoted_headers_stay_linear() {
        // Each accept function looked back to the start of the line, and each
        // PuTTY header walked over the headers quoted after it: quadratic.
        let one_line = "pass=Xy7!k ".repeat(100_000);
        let found = find(&one_line, &DetectorOptions::default());
        assert_eq!(found.len(), 100_000);
        assert_eq!(&one_line[found[99_999].range.clone()], "Xy7!k");
        let headers = "Comment: PuTTY-User-Key-File-3: x\n".repeat(50_000);
        assert_eq!(find(&headers, &DetectorOptions::default()), vec![]);
    }

    /// Every trigger occurrence the first texts' automaton reports, sorted.
    fn first_hits(text: &str) -> Vec<(usize, Range<usize>)> {
        let mut hits = Vec::new();
        let compiled = &*COMPILED;
        let lower = text.to_ascii_lowercase();
        for found in compiled.first_triggers.find_overlapping_iter(&lower) {
            for &literal in &compiled.lowered_literals[found.value() as usize] {
                hits.push((literal, found.start()..found.end()));
            }
        }
        hits.sort_by_key(|(literal, range)| (range.start, range.end, *literal));
        hits
    }

    /// The same, by the DFA the bulk of a vault is scanned with.
    fn dfa_hits(text: &str) -> Vec<(usize, Range<usize>)> {
        static DFA: LazyLock<AhoCorasick> =
            LazyLock::new(|| trigger_automaton(&COMPILED.literals, AhoCorasickKind::DFA));
        let mut hits: Vec<(usize, Range<usize>)> = DFA
            .find_overlapping_iter(text)
            .map(|found| (found.pattern().as_usize(), found.range()))
            .collect();
        hits.sort_by_key(|(literal, range)| (range.start, range.end, *literal));
        hits
    }

    #[test]
    fn both_trigger_automata_find_every_literal_in_any_case() {
        let literals = &COMPILED.literals;
        for (index, literal) in literals.iter().enumerate() {
            for written in [
                literal.to_string(),
                literal.to_ascii_uppercase(),
                literal.to_ascii_lowercase(),
            ] {
                let text = format!("x {written} y");
                let hits = first_hits(&text);
                assert!(
                    hits.contains(&(index, 2..2 + written.len())),
                    "{written:?} not found"
                );
                assert_eq!(hits, dfa_hits(&text), "{written:?}");
            }
        }
    }

    fn filler() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9 ,.!?()#*|:=中文字の\t-]{0,40}"
    }

    proptest! {
        /// Texts of trigger pieces in mixed case, non-ASCII letters that
        /// fold to ASCII ones in Unicode (not in ASCII: neither automaton
        /// folds them) and filler: both automata find the same triggers.
        #[test]
        fn both_trigger_automata_find_the_same_triggers(
            pieces in proptest::collection::vec(
                (0..COMPILED.literals.len(), 0usize..40, 0usize..40, any::<u64>(), filler()),
                0..12,
            ),
        ) {
            let mut text = String::new();
            for (literal, from, to, case, filler) in pieces {
                let literal: Vec<char> = COMPILED.literals[literal].chars().collect();
                let to = to.min(literal.len());
                let from = from.min(to);
                for (i, c) in literal[from..to].iter().enumerate() {
                    match (case >> (i % 64)) & 3 {
                        0 => text.push(c.to_ascii_uppercase()),
                        1 => text.push(c.to_ascii_lowercase()),
                        2 if *c == 'k' || *c == 'K' => text.push('\u{212A}'),
                        _ => text.push(*c),
                    }
                }
                text.push_str(&filler);
            }
            prop_assert_eq!(first_hits(&text), dfa_hits(&text));
        }

        #[test]
        fn planted_secrets_are_all_redacted_and_the_rest_kept(
            pieces in proptest::collection::vec((filler(), 0..SAMPLES.len()), 1..8),
            tail in filler(),
        ) {
            let mut text = String::new();
            let mut secrets = Vec::new();
            for (before_text, sample) in &pieces {
                let (_, before, secret, after) = SAMPLES[*sample];
                text.push_str(before_text);
                text.push('\n');
                text.push_str(before);
                let start = text.len();
                text.push_str(secret);
                secrets.push((start..text.len(), secret));
                text.push_str(after);
                text.push('\n');
            }
            text.push_str(&tail);
            let (redacted, findings) = redact(&text, &PERSONAL);
            assert_well_formed(&text, &findings);
            // A window also found in the text around the secrets (a shared `https://`) may rightly stay.
            let mut around_secrets = text.clone().into_bytes();
            for (range, _) in &secrets {
                around_secrets[range.clone()].fill(0);
            }
            for (range, secret) in &secrets {
                prop_assert!(
                    findings.iter().any(|f| f.range.start <= range.start && range.end <= f.range.end),
                    "planted {secret:?} not covered by {findings:?}"
                );
                let bytes = secret.as_bytes();
                for window in bytes.windows(8) {
                    if around_secrets.windows(8).any(|w| w == window) {
                        continue;
                    }
                    prop_assert!(
                        !redacted.as_bytes().windows(8).any(|w| w == window),
                        "a piece of {secret:?} survived"
                    );
                }
            }
            let mut rest = redacted.as_str();
            let mut copied_up_to = 0;
            for finding in &findings {
                let kept = &text[copied_up_to..finding.range.start];
                prop_assert!(rest.starts_with(kept));
                rest = &rest[kept.len()..];
                let placeholder = format!("[REDACTED:{}]", finding.kind);
                prop_assert!(rest.starts_with(&placeholder));
                rest = &rest[placeholder.len()..];
                copied_up_to = finding.range.end;
            }
            prop_assert_eq!(rest, &text[copied_up_to..]);
        }

        #[test]
        fn line_local_detectors_find_what_a_whole_text_scan_finds(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("password".to_string()), Just("pass".to_string()), Just("pw".to_string()),
                    Just("api_key".to_string()), Just("Key Ideas".to_string()), Just("secret".to_string()),
                    Just("token".to_string()), Just("salt".to_string()), Just("credentials".to_string()),
                    Just("mysql -u root -p".to_string()), Just("sshpass -p ".to_string()),
                    Just("curl -u bob:".to_string()), Just("--password ".to_string()),
                    Just(" is ".to_string()), Just(" for the db was ".to_string()), Just("密码".to_string()),
                    Just("是".to_string()), Just("：".to_string()), Just(": ".to_string()), Just("=".to_string()),
                    Just(" = ".to_string()), Just("\"".to_string()), Just("'".to_string()), Just("`".to_string()),
                    Just("**".to_string()), Just("\n".to_string()), Just("\r\n".to_string()), Just("\t".to_string()),
                    Just("\u{212A}ey=Xy7!kQ2z".to_string()), Just("pa\u{17F}\u{17F}=Xy7!kQ2z".to_string()),
                    "[A-Za-z0-9!#%_.-]{0,16}", "\\PC{0,6}",
                ],
                0..30,
            )
        ) {
            let text: String = parts.concat();
            let options = DetectorOptions::default();
            prop_assert_eq!(find_in(&text, &options, true), find_in(&text, &options, false));
        }

        #[test]
        fn find_never_panics_and_ranges_are_well_formed(text in any::<String>()) {
            assert_well_formed(&text, &find(&text, &PERSONAL));
        }

        #[test]
        fn find_is_well_formed_on_trigger_soup(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("sk-".to_string()), Just("AKIA".to_string()), Just("password=".to_string()),
                    Just("-----BEGIN RSA PRIVATE KEY-----\n".to_string()), Just("-----END RSA PRIVATE KEY-----".to_string()),
                    Just("eyJ".to_string()), Just("://u:".to_string()), Just("@".to_string()), Just("+4".to_string()),
                    Just(".".to_string()), Just("\n".to_string()), Just("密".to_string()),
                    "[A-Za-z0-9+/=_-]{0,30}", "\\PC{0,10}", "[\\x00-\\x1f]{0,3}",
                ],
                0..40,
            )
        ) {
            let text: String = parts.concat();
            assert_well_formed(&text, &find(&text, &PERSONAL));
        }

        #[test]
        fn the_nfa_and_the_dfa_find_the_same_triggers(
            parts in proptest::collection::vec(
                prop_oneof![
                    proptest::sample::select(COMPILED.literals.clone()).prop_map(str::to_string),
                    proptest::sample::select(COMPILED.literals.clone())
                        .prop_map(|l| l.to_ascii_uppercase()),
                    "\\PC{0,12}",
                ],
                0..30,
            )
        ) {
            let text: String = parts.concat();
            let triggers = |kind| {
                trigger_automaton(&COMPILED.literals, kind)
                    .find_overlapping_iter(&text)
                    .map(|m| (m.pattern().as_usize(), m.range()))
                    .collect::<Vec<_>>()
            };
            prop_assert_eq!(
                triggers(AhoCorasickKind::ContiguousNFA),
                triggers(AhoCorasickKind::DFA)
            );
        }
    }
}
