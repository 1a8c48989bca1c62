//! Reading a file that configuration names (`--policy FILE`, `--config
//! FILE`, a credentials or secret file) the one safe way: only a regular
//! file (a symlink to one is fine), at most a stated number of bytes, within
//! a deadline, and with an error that names the flag and the file.
//!
//! Why each rule: `/dev/zero` in a file's place once grew a process to 5 GB
//! in three seconds, and a FIFO hung it before its probe port was up, with
//! nothing logged. So the type is checked before opening, the open never
//! waits for a writer (`O_NONBLOCK`, in case a FIFO is swapped in between),
//! the opened file's type is checked again, the read stops one byte past the
//! bound, and a read that still does not finish in time (a stuck network
//! file system) is abandoned with an error instead of hanging start-up.

use std::fs::{Metadata, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// How long a configuration file may take to read before start-up gives up.
pub const READ_DEADLINE: Duration = Duration::from_secs(5);

/// Why a file named by a flag cannot be used. Every message starts with the
/// flag and the file, so an operator knows which setting to fix.
#[derive(Debug)]
pub struct ConfigFileError {
    /// The flag (or setting) that named the file, e.g. `--policy`.
    pub flag: String,
    pub path: PathBuf,
    pub problem: Problem,
}

/// What is wrong with the file.
#[derive(Debug)]
pub enum Problem {
    /// It cannot be opened or read.
    Io(std::io::Error),
    /// It is a FIFO, socket, device or directory.
    NotRegular(&'static str),
    /// It is larger than the bound, in bytes.
    TooLarge(u64),
    /// Reading it took longer than the deadline.
    TimedOut(Duration),
    /// It is not UTF-8 text.
    NotText,
}

impl std::fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (flag, path) = (&self.flag, self.path.display());
        match &self.problem {
            Problem::Io(error) => write!(f, "{flag} {path}: cannot read it: {error}"),
            Problem::NotRegular(kind) => {
                write!(f, "{flag} {path}: is {kind}, not a regular file: refused")
            }
            Problem::TooLarge(max) => {
                write!(f, "{flag} {path}: is larger than {max} bytes: refused")
            }
            Problem::TimedOut(after) => write!(
                f,
                "{flag} {path}: reading it took longer than {}: refused",
                humantime::format_duration(*after)
            ),
            Problem::NotText => write!(f, "{flag} {path}: is not UTF-8 text"),
        }
    }
}

impl std::error::Error for ConfigFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.problem {
            Problem::Io(error) => Some(error),
            _ => None,
        }
    }
}

/// Read the text of `path`, named by `flag`, if it is a regular file of at
/// most `max_bytes`, within [`READ_DEADLINE`]. Blocking: call it at
/// start-up or from `spawn_blocking`.
pub fn read(flag: &str, path: &Path, max_bytes: u64) -> Result<String, ConfigFileError> {
    read_within(flag, path, max_bytes, READ_DEADLINE)
}

/// [`read`] with a deadline of the caller's choosing.
pub fn read_within(
    flag: &str,
    path: &Path,
    max_bytes: u64,
    deadline: Duration,
) -> Result<String, ConfigFileError> {
    let bytes = read_bytes_within(flag, path, max_bytes, deadline)?;
    String::from_utf8(bytes).map_err(|_| ConfigFileError {
        flag: flag.to_string(),
        path: path.to_path_buf(),
        problem: Problem::NotText,
    })
}

/// [`read`] for a file that need not be text (a key file may hold raw
/// random bytes): the same rules, the bytes as they are.
pub fn read_bytes(flag: &str, path: &Path, max_bytes: u64) -> Result<Vec<u8>, ConfigFileError> {
    read_bytes_within(flag, path, max_bytes, READ_DEADLINE)
}

/// [`read_bytes`] with a deadline of the caller's choosing.
pub fn read_bytes_within(
    flag: &str,
    path: &Path,
    max_bytes: u64,
    deadline: Duration,
) -> Result<Vec<u8>, ConfigFileError> {
    let fail = |problem| ConfigFileError {
        flag: flag.to_string(),
        path: path.to_path_buf(),
        problem,
    };
    let (done, outcome) = mpsc::channel();
    let owned = path.to_path_buf();
    // A thread of its own, so a read stuck in the kernel cannot hold the
    // caller past the deadline; it ends when the read does.
    std::thread::Builder::new()
        .name("config-file-read".into())
        .spawn(move || {
            let _ = done.send(read_regular(&owned, max_bytes));
        })
        .map_err(|error| fail(Problem::Io(error)))?;
    match outcome.recv_timeout(deadline) {
        Ok(result) => result.map_err(fail),
        Err(_) => Err(fail(Problem::TimedOut(deadline))),
    }
}

fn read_regular(path: &Path, max_bytes: u64) -> Result<Vec<u8>, Problem> {
    let check = |meta: &Metadata| {
        if !meta.is_file() {
            return Err(Problem::NotRegular(kind(meta)));
        }
        if meta.len() > max_bytes {
            return Err(Problem::TooLarge(max_bytes));
        }
        Ok(())
    };
    check(&std::fs::metadata(path).map_err(Problem::Io)?)?;
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(Problem::Io)?;
    check(&file.metadata().map_err(Problem::Io)?)?;
    let mut bytes = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(Problem::Io)?;
    // A file that grew after the size check is still refused.
    if bytes.len() as u64 > max_bytes {
        return Err(Problem::TooLarge(max_bytes));
    }
    Ok(bytes)
}

/// What a file that is not regular is, for the message.
pub fn kind(meta: &Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_block_device() || kind.is_char_device() {
            return "a device";
        }
    }
    if meta.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "edge-config-file-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn reads_a_regular_file() {
        let path = temp_dir().join("ok.toml");
        std::fs::write(&path, "a = 1\n").unwrap();
        assert_eq!(read("--config", &path, 64).unwrap(), "a = 1\n");
    }

    #[test]
    fn refuses_a_device_without_reading_it() {
        let error = read("--policy", Path::new("/dev/zero"), 1024).unwrap_err();
        assert!(matches!(error.problem, Problem::NotRegular("a device")));
        let message = error.to_string();
        assert!(message.starts_with("--policy /dev/zero:"), "{message}");
    }

    #[test]
    fn refuses_a_directory() {
        let error = read("--config", &temp_dir(), 1024).unwrap_err();
        assert!(matches!(error.problem, Problem::NotRegular("a directory")));
    }

    #[cfg(unix)]
    #[test]
    fn refuses_a_fifo_without_waiting_for_a_writer() {
        let path = temp_dir().join("fifo");
        let _ = std::fs::remove_file(&path);
        let status = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
        let error = read_within("--config", &path, 1024, Duration::from_secs(30)).unwrap_err();
        assert!(
            matches!(error.problem, Problem::NotRegular("a FIFO")),
            "{error}"
        );
    }

    #[test]
    fn refuses_a_file_over_the_bound_naming_it() {
        let path = temp_dir().join("big");
        std::fs::write(&path, vec![b'x'; 65]).unwrap();
        let error = read("--credentials", &path, 64).unwrap_err();
        assert!(matches!(error.problem, Problem::TooLarge(64)));
        assert!(error.to_string().contains("larger than 64 bytes"));
        std::fs::write(&path, vec![b'x'; 64]).unwrap();
        assert_eq!(read("--credentials", &path, 64).unwrap().len(), 64);
    }

    #[test]
    fn a_missing_file_names_the_flag() {
        let error = read("--config", Path::new("/nonexistent/x.toml"), 64).unwrap_err();
        assert!(matches!(error.problem, Problem::Io(_)));
        assert!(error
            .to_string()
            .starts_with("--config /nonexistent/x.toml: cannot read it"));
    }

    #[test]
    fn refuses_bytes_that_are_not_text() {
        let path = temp_dir().join("binary");
        std::fs::write(&path, [0xff, 0xfe, 0x00]).unwrap();
        let error = read("--config", &path, 64).unwrap_err();
        assert!(matches!(error.problem, Problem::NotText));
    }
}
