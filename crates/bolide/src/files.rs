//! Output files: checked before a run starts (a bad path fails fast), written whole or not at all
//! (a temporary sibling, then one rename).
//!
//! Only regular files (or paths that do not exist yet) are replaced that way. A FIFO, a character
//! device, a socket, or a path under `/dev` or `/proc` (`/dev/stdout`, a process substitution's
//! `/dev/fd/N`) is a stream someone reads: it is opened and written into, never replaced. `-` means
//! standard output, which the caller writes itself ([`is_stdout`]).
//!
//! Input files other than scenarios (request bodies, payload CSVs) are read with a size limit
//! ([`read_limited`]), so that naming `/dev/zero` or a huge file is an error, not a hang.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::problem::Problem;

/// The most bytes of a request body or payload file: far more than a load test sends or cycles
/// through, far less than a machine holds several times over.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// The error for an input larger than `max` bytes, the most bolide reads from one file.
pub fn too_large(max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("larger than {} MiB, the most bolide reads from one file", max >> 20),
    )
}

/// Reads a whole input file (a FIFO or process substitution too) of at most `max` bytes; a larger
/// one, or an endless one such as `/dev/zero`, is refused after `max + 1` bytes.
/// A regular file's size is checked before anything is read.
pub fn read_limited(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let too_large = || too_large(max);
    let file = File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_file() && meta.len() > max {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(if meta.is_file() { meta.len() as usize } else { 0 });
    io::Read::read_to_end(&mut io::Read::take(file, max + 1), &mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Whether `dest` is `-`: standard output.
pub fn is_stdout(dest: &Path) -> bool {
    dest.as_os_str() == "-"
}

/// Writes `doc` as pretty JSON to `dest`: to `stdout` when `dest` is `-`, else whole or not at all.
pub fn write_json(dest: &Path, stdout: &mut dyn Write, doc: &impl serde::Serialize) -> io::Result<()> {
    if is_stdout(dest) {
        serde_json::to_writer_pretty(&mut *stdout, doc).map_err(io::Error::other)?;
        writeln!(stdout)?;
        return stdout.flush();
    }
    write_atomically(dest, |w| {
        serde_json::to_writer_pretty(&mut *w, doc).map_err(io::Error::other)?;
        w.write_all(b"\n")
    })
}

/// Whether `dest` is a stream to write into rather than a file to replace.
pub fn is_stream(dest: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    if dest.starts_with("/dev") || dest.starts_with("/proc") {
        return true;
    }
    std::fs::metadata(dest).is_ok_and(|m| {
        let t = m.file_type();
        t.is_fifo() || t.is_char_device() || t.is_socket() || t.is_block_device()
    })
}

/// A hidden sibling of `dest` with a purpose tag and this process's id (in the temporary directory
/// when `dest` is a stream: nothing is created beside a device).
pub fn sibling(dest: &Path, tag: &str) -> PathBuf {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let name = format!(".{name}.{tag}.{}", std::process::id());
    if is_stream(dest) {
        std::env::temp_dir().join(name)
    } else {
        dest.with_file_name(name)
    }
}

/// Checks that `dest` can be written, by creating and removing a sibling; names the path on error.
pub fn check_writable(dest: &Path) -> Result<(), Problem> {
    if is_stdout(dest) {
        return Ok(());
    }
    if dest.is_dir() {
        return Err(format!("{} is a directory", dest.display()).into());
    }
    if is_stream(dest) {
        // Opening a FIFO would wait for its reader; the write at the end says if it fails.
        return Ok(());
    }
    let probe = sibling(dest, "probe");
    match OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!("cannot write {}: {e}", dest.display()).into()),
    }
}

/// Writes `dest` through `fill` into a temporary sibling, then renames it into place; on any
/// error the temporary file is removed and `dest` is untouched.
pub fn write_atomically(dest: &Path, fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>) -> io::Result<()> {
    if is_stream(dest) {
        // Appending: a descriptor that is really a regular file (`/dev/stdout > out.txt`) keeps
        // what was written to it before.
        let mut w = BufWriter::new(OpenOptions::new().append(true).open(dest)?);
        fill(&mut w)?;
        return w.flush();
    }
    let tmp = sibling(dest, "tmp");
    let result = (|| {
        let mut w = BufWriter::new(File::create(&tmp)?);
        fill(&mut w)?;
        w.flush()?;
        w.get_ref().sync_all()?;
        std::fs::rename(&tmp, dest)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_leaves_old_file_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("r.json");
        write_atomically(&dest, |w| w.write_all(b"first")).unwrap();
        let err = write_atomically(&dest, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("boom"))
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "first");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary left");
    }

    #[test]
    fn a_fifo_is_written_into_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("results.fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(is_stream(&fifo) && check_writable(&fifo).is_ok());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        write_atomically(&fifo, |w| w.write_all(b"{\"ok\":true}")).unwrap();
        assert_eq!(reader.join().unwrap(), "{\"ok\":true}");
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "still a FIFO");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "nothing beside it");
        // Devices and descriptors are streams; `-` is standard output.
        assert!(is_stream(Path::new("/dev/null")) && is_stream(Path::new("/dev/stdout")));
        assert!(is_stdout(Path::new("-")) && check_writable(Path::new("-")).is_ok());
        assert!(!is_stream(&dir.path().join("plain.json")));
    }

    #[test]
    fn unwritable_paths_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/dir/r.json");
        let msg = check_writable(&missing).unwrap_err().to_string();
        assert!(msg.contains("no/such/dir"), "{msg}");
        assert!(check_writable(dir.path()).unwrap_err().to_string().contains("is a directory"));
        assert!(check_writable(&dir.path().join("ok.json")).is_ok());
    }
}
