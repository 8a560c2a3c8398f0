//! The runner's side of the testee protocol (docs/testee.md): one testee
//! process for the whole run, requests written one at a time, each answer
//! awaited with a timeout, and a crash, a hang or garbage turned into the
//! failure of the case being checked followed by a restart (§6), never into
//! a panic or the end of the run.
//!
//! Three threads per testee process keep the runner from blocking on it: a
//! writer (a testee that stops reading must not block the runner's write), a
//! reader of its standard output (framed answers, handed over a channel that
//! the runner waits on with the timeout) and a reader of its standard error
//! (the last [`STDERR_TAIL`] bytes, quoted in failures). A process that
//! failed is killed and reaped before the next one starts.

use std::collections::VecDeque;
use std::fmt;
use std::io::{BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::{
    decode_request, encode_request, framed, hello_request, parse_decode_answer, parse_encode_answer, parse_message,
    read_message_within, Answer, FrameError, Hello, ProtocolError, RequestKind, GATEWAY_SKIP, MAX_ANSWER, MAX_MESSAGE,
    PROTOCOL,
};
use crate::check::{check_message, Verdict};
use crate::codec::{Codec, DecodeAnswer, EncodeAnswer, NoAnswer, Target};
use crate::corpus::{Body, Case};

/// How much of a testee's standard error a failure quotes.
pub const STDERR_TAIL: usize = 2000;

/// Restarts that may fail in a row before the runner stops trying
/// (docs/testee.md §6.1).
pub const MAX_FAILED_STARTS: usize = 3;

/// What went wrong with a testee, naming the request and the case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TesteeError {
    /// The command could not be run at all.
    Spawn { command: String, why: String },
    /// End of the testee's standard output while an answer was awaited.
    Crashed { request: &'static str, case: String, status: String, stderr: String },
    /// No complete answer within the timeout.
    TimedOut { request: &'static str, case: String, after: Duration, stderr: String },
    /// An answer that breaks the protocol (docs/testee.md §2.2, §5).
    Garbage { request: &'static str, case: String, why: String },
    /// The testee answered `{"error": ...}`.
    Reported { request: &'static str, case: String, message: String },
    /// The handshake answer names another protocol version.
    Protocol { got: u64 },
    /// A restart failed (the case that needed it fails).
    Restart { case: String, why: Box<TesteeError> },
    /// Too many restarts failed in a row: the runner stopped trying.
    GaveUp { case: String, attempts: usize, last: Box<TesteeError> },
}

fn of(case: &str) -> String {
    if case.is_empty() {
        String::new()
    } else {
        format!(" of {case}")
    }
}

fn stderr_note(stderr: &str) -> String {
    if stderr.is_empty() {
        "no stderr".into()
    } else {
        format!("stderr: {stderr}")
    }
}

impl fmt::Display for TesteeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TesteeError::Spawn { command, why } => write!(f, "cannot run the testee `{command}`: {why}"),
            TesteeError::Crashed { request, case, status, stderr } => {
                write!(f, "the testee crashed on {request}{} ({status}; {})", of(case), stderr_note(stderr))
            }
            TesteeError::TimedOut { request, case, after, stderr } => write!(
                f,
                "the testee timed out on {request}{} after {} s ({})",
                of(case),
                after.as_secs_f64(),
                stderr_note(stderr)
            ),
            TesteeError::Garbage { request, case, why } => {
                write!(f, "the testee answered garbage to {request}{}: {why}", of(case))
            }
            TesteeError::Reported { request, case, message } => {
                write!(f, "the testee reported an error on {request}{}: {message}", of(case))
            }
            TesteeError::Protocol { got } => {
                write!(f, "the testee speaks protocol version {got}, this runner speaks {PROTOCOL}")
            }
            TesteeError::Restart { case, why } => write!(f, "the testee could not be restarted for {case}: {why}"),
            TesteeError::GaveUp { case, attempts, last } => write!(
                f,
                "the testee could not be restarted for {case}: {attempts} restarts failed in a row, the last: {last}"
            ),
        }
    }
}

impl std::error::Error for TesteeError {}

/// Why a testee command line does not split into words ([`split_command`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error("unterminated single quote in `{line}`")]
    UnterminatedSingleQuote { line: String },
    #[error("unterminated double quote in `{line}`")]
    UnterminatedDoubleQuote { line: String },
    #[error("`{line}` ends with a lone backslash")]
    LoneBackslash { line: String },
    #[error("the testee command is empty")]
    Empty,
}

/// Splits a command line into words as a shell would (docs/testee.md §1.1):
/// whitespace separates words; single quotes keep everything literally;
/// double quotes group, with `\` escaping `"` and `\`; a bare `\` escapes
/// the next character. No variables, globs, pipes or redirections.
pub fn split_command(line: &str) -> Result<Vec<String>, CommandError> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    let single = || CommandError::UnterminatedSingleQuote { line: line.to_string() };
    let double = || CommandError::UnterminatedDoubleQuote { line: line.to_string() };
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err(single()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err(double()),
                        },
                        Some(c) => w.push(c),
                        None => return Err(double()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err(CommandError::LoneBackslash { line: line.to_string() }),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    if words.is_empty() {
        return Err(CommandError::Empty);
    }
    Ok(words)
}

/// The end of a testee's standard error.
type Tail = Arc<Mutex<VecDeque<u8>>>;

/// One running testee process and its three threads.
struct Process {
    child: Child,
    /// To the writer thread; dropped to close the testee's standard input.
    requests: Option<Sender<Vec<u8>>>,
    answers: Receiver<Result<Vec<u8>, FrameError>>,
    stderr: Tail,
    stderr_done: Receiver<()>,
}

impl Process {
    fn spawn(argv: &[String]) -> Result<Process, TesteeError> {
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| TesteeError::Spawn { command: argv.join(" "), why: e.to_string() })?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(TesteeError::Spawn { command: argv.join(" "), why: "no pipes to the testee".into() });
        };
        let (requests, to_write) = mpsc::channel::<Vec<u8>>();
        thread::spawn(move || writer(stdin, to_write));
        let (answer_tx, answers) = mpsc::channel();
        thread::spawn(move || {
            let mut out = BufReader::new(stdout);
            loop {
                let message = read_message_within(&mut out, MAX_ANSWER);
                let last = message.is_err();
                if answer_tx.send(message).is_err() || last {
                    break;
                }
            }
        });
        let tail: Tail = Arc::default();
        let (done_tx, stderr_done) = mpsc::channel();
        let sink = tail.clone();
        thread::spawn(move || {
            let mut err = stderr;
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = err.read(&mut buf) {
                if let Ok(mut t) = sink.lock() {
                    t.extend(&buf[..n]);
                    let excess = t.len().saturating_sub(STDERR_TAIL);
                    t.drain(..excess);
                }
            }
            let _ = done_tx.send(());
        });
        Ok(Process { child, requests: Some(requests), answers, stderr: tail, stderr_done })
    }

    /// The end of standard error so far, on one line. `settle` waits (a
    /// little) for the stderr reader to reach the end, for a process that
    /// has exited.
    fn stderr_tail(&self, settle: bool) -> String {
        if settle {
            let _ = self.stderr_done.recv_timeout(Duration::from_millis(500));
        }
        let bytes: Vec<u8> = self.stderr.lock().map(|t| t.iter().copied().collect()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// Waits up to `grace` for the process to exit by itself, then kills it.
    fn reap(&mut self, grace: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                _ => break,
            }
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.requests = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn writer(mut stdin: ChildStdin, requests: Receiver<Vec<u8>>) {
    for message in requests {
        if stdin.write_all(&message).and_then(|()| stdin.flush()).is_err() {
            break; // the testee is gone; the reader reports it
        }
    }
}

/// A testee: the command, its support declaration, and the running process
/// (restarted as needed).
pub struct Testee {
    argv: Vec<String>,
    timeout: Duration,
    hello: Hello,
    running: Option<Process>,
    failed_starts: usize,
    last_start_error: Option<TesteeError>,
    /// Requests written, handshakes included.
    pub requests: usize,
    /// Processes started after the first.
    pub restarts: usize,
}

impl Testee {
    /// Starts the testee `command` (split by [`split_command`]) and runs the
    /// handshake (docs/testee.md §3). `timeout` bounds every answer.
    pub fn start(command: &str, timeout: Duration) -> Result<Testee, TesteeError> {
        let argv = split_command(command)
            .map_err(|why| TesteeError::Spawn { command: command.into(), why: why.to_string() })?;
        let mut testee = Testee {
            argv,
            timeout,
            hello: Hello { protocol: PROTOCOL, implementation: String::new(), supports: vec![], unsupported: None },
            running: None,
            failed_starts: 0,
            last_start_error: None,
            requests: 0,
            restarts: 0,
        };
        testee.hello = testee.launch()?;
        Ok(testee)
    }

    /// The support declaration of the first handshake.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// Spawns a process and runs the handshake on it.
    fn launch(&mut self) -> Result<Hello, TesteeError> {
        self.running = Some(Process::spawn(&self.argv)?);
        let answer = self.call(hello_request(), RequestKind::Hello, "")?;
        let hello = Hello::parse(&answer).map_err(|why| self.garbage(RequestKind::Hello, "", why))?;
        if hello.protocol != PROTOCOL {
            self.running = None;
            return Err(TesteeError::Protocol { got: hello.protocol });
        }
        Ok(hello)
    }

    /// A running process for `case`: the current one, or a restarted one
    /// (docs/testee.md §6.1).
    fn ensure_running(&mut self, case: &str) -> Result<(), TesteeError> {
        if self.running.is_some() {
            return Ok(());
        }
        if self.failed_starts >= MAX_FAILED_STARTS {
            let last = self
                .last_start_error
                .clone()
                .unwrap_or(TesteeError::Spawn { command: self.argv.join(" "), why: "unknown".into() });
            return Err(TesteeError::GaveUp { case: case.into(), attempts: self.failed_starts, last: Box::new(last) });
        }
        self.restarts += 1;
        match self.launch() {
            Ok(_) => {
                self.failed_starts = 0;
                Ok(())
            }
            Err(e) => {
                self.running = None;
                self.failed_starts += 1;
                self.last_start_error = Some(e.clone());
                Err(TesteeError::Restart { case: case.into(), why: Box::new(e) })
            }
        }
    }

    /// Drops the process (killed and reaped) after garbage.
    fn garbage(&mut self, request: RequestKind, case: &str, why: impl fmt::Display) -> TesteeError {
        self.running = None;
        TesteeError::Garbage { request: request.key(), case: case.into(), why: why.to_string() }
    }

    /// Writes one request and reads its answer as a JSON object. Every
    /// error but `Reported` leaves no process running.
    fn call(&mut self, body: Vec<u8>, kind: RequestKind, case: &str) -> Result<Json, TesteeError> {
        let request = kind.key();
        let timeout = self.timeout;
        let Some(p) = self.running.as_mut() else {
            return Err(TesteeError::Crashed {
                request,
                case: case.into(),
                status: "not running".into(),
                stderr: String::new(),
            });
        };
        if body.len() as u64 > MAX_MESSAGE {
            return Err(TesteeError::Reported {
                request,
                case: case.into(),
                message: "the request is longer than the protocol allows (1 GiB); not sent".into(),
            });
        }
        self.requests += 1;
        if let Some(tx) = &p.requests {
            // A closed channel means the writer saw the testee go; the
            // reader then reports the end of its output.
            let _ = tx.send(framed(&body));
        }
        let answer = p.answers.recv_timeout(timeout);
        match answer {
            Ok(Ok(bytes)) => parse_message(&bytes).map_err(|why| self.garbage(kind, case, why)),
            Ok(Err(FrameError::End)) | Err(RecvTimeoutError::Disconnected) => {
                let status = p.reap(Duration::from_secs(1)).map_or("exit status unknown".into(), |s| s.to_string());
                let stderr = p.stderr_tail(true);
                self.running = None;
                Err(TesteeError::Crashed { request, case: case.into(), status, stderr })
            }
            Ok(Err(e)) => Err(self.garbage(kind, case, e)),
            Err(RecvTimeoutError::Timeout) => {
                p.reap(Duration::ZERO);
                let stderr = p.stderr_tail(true);
                self.running = None;
                Err(TesteeError::TimedOut { request, case: case.into(), after: timeout, stderr })
            }
        }
    }

    /// One decode or encode request for `target`: the answer, or why there
    /// is none (docs/testee.md §5-§6).
    fn ask<T>(
        &mut self,
        target: &Target,
        kind: RequestKind,
        body: Vec<u8>,
        parse: fn(&Json) -> Result<Answer<T>, ProtocolError>,
    ) -> Result<T, NoAnswer> {
        if !self.hello.supports(target.dialect, target.version, target.message_name()) {
            return Err(NoAnswer::Skipped(self.hello.unsupported_reason(
                target.dialect,
                target.version,
                target.message_name(),
            )));
        }
        let failed = |e: TesteeError| NoAnswer::Failed(e.to_string());
        self.ensure_running(target.case).map_err(failed)?;
        let answer = self.call(body, kind, target.case).map_err(failed)?;
        match parse(&answer) {
            Ok(Answer::Answer(a)) => Ok(a),
            Ok(Answer::Skipped(why)) => Err(NoAnswer::Skipped(format!("skipped by the testee: {why}"))),
            Ok(Answer::Error(message)) => {
                Err(failed(TesteeError::Reported { request: kind.key(), case: target.case.into(), message }))
            }
            Err(why) => Err(failed(self.garbage(kind, target.case, why))),
        }
    }

    /// Closes the testee's standard input and waits up to the timeout for
    /// it to exit (docs/testee.md §1.5); kills it otherwise.
    pub fn finish(mut self) {
        if let Some(mut p) = self.running.take() {
            p.requests = None;
            p.reap(self.timeout);
        }
    }
}

impl Codec for Testee {
    fn decode(&mut self, target: &Target, frames: &[Vec<u8>]) -> Result<DecodeAnswer, NoAnswer> {
        self.ask(target, RequestKind::Decode, decode_request(target, frames), parse_decode_answer)
    }

    fn encode(&mut self, target: &Target, view: &Json) -> Result<EncodeAnswer, NoAnswer> {
        self.ask(target, RequestKind::Encode, encode_request(target, view), parse_encode_answer)
    }
}

/// Checks one case through the testee: message cases by the checks of
/// docs/case-format.md §9.2; the gateway kinds are skipped (docs/testee.md
/// §8).
pub fn check(testee: &mut Testee, case: &Case) -> Verdict {
    match &case.body {
        Body::Message { .. } => check_message(testee, case),
        Body::Other { .. } => Verdict::Skip(GATEWAY_SKIP.into()),
        Body::Unsupported(why) => Verdict::Skip(why.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_splits_into_words_as_a_shell_would() {
        let words = split_command(r#"  /bin/my\ testee --name 'a b' "c \"d\"" e\\f  "#).unwrap();
        assert_eq!(words, ["/bin/my testee", "--name", "a b", "c \"d\"", "e\\f"]);
        assert_eq!(split_command("x ''").unwrap(), ["x", ""]);
    }

    #[test]
    fn an_empty_or_unterminated_command_is_an_error() {
        assert_eq!(split_command("   "), Err(CommandError::Empty));
        assert_eq!(split_command("a 'b"), Err(CommandError::UnterminatedSingleQuote { line: "a 'b".into() }));
        assert_eq!(split_command("a \"b"), Err(CommandError::UnterminatedDoubleQuote { line: "a \"b".into() }));
        assert_eq!(split_command("a \\"), Err(CommandError::LoneBackslash { line: "a \\".into() }));
    }

    #[test]
    fn a_command_that_cannot_run_is_a_spawn_error() {
        let e = Testee::start("/nonexistent/testee --flag", Duration::from_secs(1)).err().unwrap();
        assert!(matches!(e, TesteeError::Spawn { .. }), "{e}");
        assert!(e.to_string().contains("/nonexistent/testee"), "{e}");
    }
}
