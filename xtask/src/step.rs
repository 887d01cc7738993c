//! One build step at a time, said out loud: what it does, roughly how long it takes, how long it
//! took, and when it fails, what to do about it.

use std::fmt;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// A step that did not finish, with the advice a user can act on.
#[derive(Debug)]
pub struct Failure {
    pub step: String,
    pub what: String,
    pub fix: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {}\n  what to do: {}", self.step, self.what, self.fix)
    }
}

impl std::error::Error for Failure {}

/// How long a step takes when nothing of it is built yet, and when it is.
#[derive(Clone, Copy, Debug)]
pub struct Estimate {
    /// Measured on a fresh 2-core machine (README, "First run").
    pub cold: &'static str,
    pub warm: &'static str,
}

/// Numbers the steps `[1/4]`, `[2/4]`, ... and times each.
pub struct Progress {
    total: usize,
    done: usize,
    started: Instant,
}

impl Progress {
    pub fn new(total: usize) -> Self {
        Self { total, done: 0, started: Instant::now() }
    }

    /// Announces a step; `cold` says whether its output is missing, so the estimate shown is the
    /// one that applies. Returns the clock to hand to [`Progress::finish`].
    pub fn start(&mut self, title: &str, estimate: Estimate, cold: bool) -> Instant {
        self.done += 1;
        let eta =
            if cold { format!("first build, about {}", estimate.cold) } else { estimate.warm.to_string() };
        eprintln!("\x1b[1m==> [{}/{}] {title} ({eta})\x1b[0m", self.done, self.total);
        Instant::now()
    }

    pub fn finish(&self, clock: Instant) {
        eprintln!("    done in {}", human(clock.elapsed().as_secs()));
    }

    pub fn total_elapsed(&self) -> String {
        human(self.started.elapsed().as_secs())
    }
}

/// Runs `command` with its output shown; a non-zero exit or a missing program becomes a
/// [`Failure`] with `fix` as the advice.
pub fn run(step: &str, command: &mut Command, fix: &str) -> Result<(), Failure> {
    let program = command.get_program().to_string_lossy().into_owned();
    let status = command.status().map_err(|e| Failure {
        step: step.into(),
        what: format!("could not start `{program}`: {e}"),
        fix: fix.into(),
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure {
            step: step.into(),
            what: format!("`{program}` exited with {status} (its errors are above)"),
            fix: fix.into(),
        })
    }
}

/// Wraps an I/O error on `path` as a step failure.
pub fn io(step: &str, path: &Path, error: std::io::Error, fix: &str) -> Failure {
    Failure { step: step.into(), what: format!("{}: {error}", path.display()), fix: fix.into() }
}

fn human(seconds: u64) -> String {
    match seconds {
        s if s < 60 => format!("{s} s"),
        s => format!("{} min {:02} s", s / 60, s % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_minutes_past_a_minute() {
        assert_eq!(human(7), "7 s");
        assert_eq!(human(125), "2 min 05 s");
    }

    #[test]
    fn a_failing_command_names_the_program_and_the_advice() {
        let err = run("probe", &mut Command::new("false"), "do the thing").unwrap_err();
        assert!(err.to_string().contains("`false` exited with"), "{err}");
        assert!(err.to_string().contains("what to do: do the thing"), "{err}");
        let missing = run("probe", &mut Command::new("no-such-program-here"), "install it").unwrap_err();
        assert!(missing.what.contains("could not start `no-such-program-here`"), "{missing}");
    }
}
