//! Secrets out of reports and logs: command lines and log text the suite
//! writes (a launched gateway's or engine's command, the tail of its log
//! quoted in an error or a report) have their credentials replaced by
//! `<redacted>` (docs/limits.md "Secrets").
//!
//! What counts as a credential (the forms the launchers and the tools they
//! start take: vLLM's and SMG's `--api-key`, Hugging Face's `HF_TOKEN`,
//! HTTP `Authorization` headers):
//!
//! - the value of an option whose name contains `key`, `token`, `secret`,
//!   `password` or `auth` (`--api-key X`, `--api-key=X`, `--hf-token 'X'`);
//! - the value of an environment assignment whose name contains `TOKEN`,
//!   `KEY`, `SECRET` or `PASSWORD` (`HF_TOKEN=X`, `OPENAI_API_KEY=X`);
//! - an `Authorization:` header's credentials (`Bearer X`, `Basic X`);
//! - Hugging Face (`hf_...`) and OpenAI-style (`sk-...`) token shapes
//!   anywhere.
//!
//! Names that merely contain these words as part of another word are
//! over-redacted rather than missed (`--tokenizer-path P` keeps its value:
//! `tokenizer` is listed as an exception, since every launch names one).

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::Regex;

/// What a secret is replaced with.
pub const REDACTED: &str = "<redacted>";

/// Parts of option names that make an option with a credential word in
/// its name not a credential (`--tokenizer-path`, `--max-tokens`).
const NOT_SECRETS: &[&str] = &["tokenizer", "tokens"];

fn patterns() -> &'static [Regex; 4] {
    static P: OnceLock<[Regex; 4]> = OnceLock::new();
    P.get_or_init(|| {
        let value = r#"('[^']*'|"[^"]*"|\S+)"#;
        [
            // --some-api-key VALUE, --token=VALUE (an option: a dash at the
            // start of a word)
            Regex::new(&format!(
                r#"(?i)(^|[\s'"(\[])(--?[A-Za-z0-9_-]*(?:key|token|secret|password|auth)[A-Za-z0-9_-]*)(=|\s+){value}"#
            ))
            .unwrap(),
            // HF_TOKEN=VALUE
            Regex::new(&format!(r"\b([A-Za-z0-9_]*(?:TOKEN|KEY|SECRET|PASSWORD)[A-Za-z0-9_]*)={value}")).unwrap(),
            // Authorization: Bearer VALUE
            Regex::new(r"(?i)(authorization\s*[:=]\s*(?:bearer|basic|token)?\s*)(\S+)").unwrap(),
            // Token shapes anywhere.
            Regex::new(r"\b(hf_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,})").unwrap(),
        ]
    })
}

/// `text` with every credential replaced by [`REDACTED`].
pub fn text(text: &str) -> Cow<'_, str> {
    let [opt, env, auth, shape] = patterns();
    let mut out = Cow::Borrowed(text);
    let opt_replaced = opt.replace_all(&out, |c: &regex::Captures<'_>| {
        let name = c[2].to_ascii_lowercase();
        if NOT_SECRETS.iter().any(|n| name.contains(n)) {
            c[0].to_string()
        } else {
            format!("{}{}{}{REDACTED}", &c[1], &c[2], &c[3])
        }
    });
    if let Cow::Owned(s) = opt_replaced {
        out = Cow::Owned(s);
    }
    for (re, with) in [(env, format!("${{1}}={REDACTED}")), (auth, format!("${{1}}{REDACTED}"))] {
        if let Cow::Owned(s) = re.replace_all(&out, with.as_str()) {
            out = Cow::Owned(s);
        }
    }
    if let Cow::Owned(s) = shape.replace_all(&out, REDACTED) {
        out = Cow::Owned(s);
    }
    out
}

/// A program and its arguments as one line, credentials redacted (an
/// argument after a credential option is its value).
pub fn command_line<S: AsRef<std::ffi::OsStr>>(program: S, args: &[S]) -> String {
    let mut line = program.as_ref().to_string_lossy().into_owned();
    for a in args {
        line.push(' ');
        let a = a.as_ref().to_string_lossy();
        if a.is_empty() || a.contains(char::is_whitespace) {
            line.push('\'');
            line.push_str(&a.replace('\'', r"'\''"));
            line.push('\'');
        } else {
            line.push_str(&a);
        }
    }
    text(&line).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_key_option_loses_its_value_in_both_spellings() {
        assert_eq!(text("vllm serve m --api-key s3cret --port 8000"), "vllm serve m --api-key <redacted> --port 8000");
        assert_eq!(text("smg launch --api-key=s3cret"), "smg launch --api-key=<redacted>");
        assert_eq!(text("x --hf-token 'a b c' --y"), "x --hf-token <redacted> --y");
    }

    #[test]
    fn token_environment_assignments_and_authorization_headers_are_redacted() {
        assert_eq!(
            text("HF_TOKEN=abc OPENAI_API_KEY=def vllm serve"),
            "HF_TOKEN=<redacted> OPENAI_API_KEY=<redacted> vllm serve"
        );
        assert_eq!(text("Authorization: Bearer abcdef"), "Authorization: Bearer <redacted>");
    }

    #[test]
    fn token_shapes_are_redacted_wherever_they_appear() {
        let t = text("loaded with hf_AbCdEfGhIjKlMnOpQrSt and sk-proj-0123456789abcdefXYZ");
        assert!(!t.contains("hf_AbCd") && !t.contains("sk-proj"), "{t}");
    }

    #[test]
    fn ordinary_arguments_are_left_as_they_are() {
        let plain = "smg launch --port 8000 --tokenizer-path /m --max-tokens 16 a non-auth path";
        assert_eq!(text(plain), plain);
    }

    #[test]
    fn a_command_line_is_quoted_and_redacted() {
        let line = command_line("smg", &["launch", "--api-key", "s3cret", "--model-path", "/a b"]);
        assert_eq!(line, "smg launch --api-key <redacted> --model-path '/a b'");
    }
}
