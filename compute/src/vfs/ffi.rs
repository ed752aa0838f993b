//! The `unsafe` of the VFS, all of it: the `sqlite3_vfs` and `sqlite3_io_methods` callbacks SQLite calls,
//! translating raw pointers and codes to and from the safe `MainFile` and registry.
//!
//! Every callback runs inside `guard`, which catches a panic and returns the callback's `SQLITE_IOERR_*`
//! code; a Rust panic never crosses into C. A store error behind an `SQLITE_IOERR_*` is noted for the SQL
//! layer (`super::note_store_error`), since SQLite passes on only the code.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::OnceLock;

use cambium_types::PAGE_SIZE_BYTES;
use rusqlite::ffi;

use super::file::LockError;
use super::file::{MainFile, ReadOutcome};
use super::lock::LockLevel;
use super::{database, is_journal_of_registered, note_busy, note_store_error, VfsError};

/// `super::VFS_NAME` as SQLite reads it.
const VFS_NAME_C: &CStr = c"cambium";

/// What SQLite allocates (`szOsFile` bytes) for a main database file opened by this VFS. `base` first, so
/// a `*mut sqlite3_file` from SQLite is a `*mut FileObject`.
#[repr(C)]
struct FileObject {
    base: ffi::sqlite3_file,
    /// From `Box::into_raw` in `x_open`; freed and set to null by `x_close`.
    main: *mut MainFile,
}

/// SQLite's default VFS, to which everything but registered main files is delegated.
struct DefaultVfs(*mut ffi::sqlite3_vfs);

// SAFETY: the default VFS is a process-wide object SQLite never frees; its methods are thread-safe (SQLite
// calls them from any thread).
unsafe impl Send for DefaultVfs {}
// SAFETY: as for `Send`: the pointer is only read, and the object behind it is thread-safe.
unsafe impl Sync for DefaultVfs {}

static DEFAULT_VFS: OnceLock<DefaultVfs> = OnceLock::new();
static REGISTERED: OnceLock<Result<(), c_int>> = OnceLock::new();

static IO_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    // Version 1: no shared memory (so no WAL mode) and no memory mapping.
    iVersion: 1,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

/// Registers the VFS with SQLite (not as the default) once per process.
pub(super) fn register_vfs() -> Result<(), VfsError> {
    match REGISTERED.get_or_init(register_once) {
        Ok(()) => Ok(()),
        Err(code) => Err(VfsError::Register(*code)),
    }
}

fn register_once() -> Result<(), c_int> {
    assert_eq!(VFS_NAME_C.to_str(), Ok(super::VFS_NAME));
    // SAFETY: `sqlite3_vfs_find` may be called at any time (it initialises SQLite); null asks for the default.
    let default = unsafe { ffi::sqlite3_vfs_find(ptr::null()) };
    if default.is_null() {
        return Err(ffi::SQLITE_ERROR);
    }
    // SAFETY: non-null, and a registered VFS lives until it is unregistered, which nothing here does.
    let default_ref = unsafe { &*default };
    let file_size_bytes = size_of::<FileObject>().max(usize::try_from(default_ref.szOsFile).unwrap_or(0));
    let vfs = Box::leak(Box::new(ffi::sqlite3_vfs {
        // Version 2 for xCurrentTimeInt64; the system-call hooks of version 3 are not offered.
        iVersion: 2,
        szOsFile: c_int::try_from(file_size_bytes).map_err(|_| ffi::SQLITE_ERROR)?,
        mxPathname: default_ref.mxPathname,
        pNext: ptr::null_mut(),
        zName: VFS_NAME_C.as_ptr(),
        pAppData: ptr::null_mut(),
        xOpen: Some(x_open),
        xDelete: Some(x_delete),
        xAccess: Some(x_access),
        xFullPathname: Some(x_full_pathname),
        // Loading extensions is off (rusqlite's default), so SQLite never calls these.
        xDlOpen: None,
        xDlError: None,
        xDlSym: None,
        xDlClose: None,
        xRandomness: Some(x_randomness),
        xSleep: Some(x_sleep),
        xCurrentTime: Some(x_current_time),
        xGetLastError: Some(x_get_last_error),
        xCurrentTimeInt64: Some(x_current_time_int64),
        xSetSystemCall: None,
        xGetSystemCall: None,
        xNextSystemCall: None,
    }));
    let _ = DEFAULT_VFS.set(DefaultVfs(default));
    // SAFETY: `vfs` is fully initialised and leaked, so it outlives every use SQLite makes of it; 0 = not the
    // default VFS.
    let rc = unsafe { ffi::sqlite3_vfs_register(vfs, 0) };
    if rc != ffi::SQLITE_OK {
        return Err(rc);
    }
    Ok(())
}

/// Runs a callback body, turning a panic into `on_panic` (an `SQLITE_IOERR_*` code).
fn guard(on_panic: c_int, body: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        tracing::error!(code = on_panic, "a VFS callback panicked");
        on_panic
    })
}

/// The default VFS; set before the VFS is registered, so before any callback can run.
fn default_vfs() -> Option<*mut ffi::sqlite3_vfs> {
    DEFAULT_VFS.get().map(|default| default.0)
}

/// The name SQLite passed, if it is one (not null, UTF-8).
///
/// # Safety
/// `name` is null or a NUL-terminated string that outlives `'a`.
unsafe fn name_str<'a>(name: *const c_char) -> Option<&'a str> {
    if name.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per the contract.
    unsafe { CStr::from_ptr(name) }.to_str().ok()
}

/// The `MainFile` behind a file SQLite passes to an io method.
///
/// # Safety
/// `file` was opened by `x_open` with `IO_METHODS` and is not closed; SQLite never calls two methods of
/// one file at once, so the `&mut` is unique for the call.
unsafe fn main_file<'a>(file: *mut ffi::sqlite3_file) -> Option<&'a mut MainFile> {
    // SAFETY: per the contract `file` points at a `FileObject`, `base` being its first field.
    let object = unsafe { &*file.cast::<FileObject>() };
    // SAFETY: `main` is from `Box::into_raw` and not yet freed (only `x_close` frees it, then nulls it).
    unsafe { object.main.as_mut() }
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    guard(ffi::SQLITE_CANTOPEN, || {
        // SAFETY: SQLite gives `szOsFile` bytes at `file`; a failed open must leave `pMethods` null.
        unsafe { (*file).pMethods = ptr::null() };
        // SAFETY: SQLite passes null (a temporary file) or a NUL-terminated name that outlives the call.
        let name_str = unsafe { name_str(name) };
        if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
            let Some(database) = name_str.and_then(database) else {
                tracing::warn!(name = name_str, "no database registered under this name");
                return ffi::SQLITE_CANTOPEN;
            };
            let main = Box::into_raw(Box::new(MainFile::new(database)));
            let object = FileObject {
                base: ffi::sqlite3_file { pMethods: &IO_METHODS },
                main,
            };
            // SAFETY: `szOsFile` is at least `size_of::<FileObject>()` and SQLite aligns it for any type.
            unsafe { ptr::write(file.cast::<FileObject>(), object) };
            if !out_flags.is_null() {
                // SAFETY: non-null, SQLite's to write.
                unsafe { *out_flags = flags };
            }
            return ffi::SQLITE_OK;
        }
        let journal_flags = ffi::SQLITE_OPEN_MAIN_JOURNAL | ffi::SQLITE_OPEN_WAL;
        if flags & journal_flags != 0 && name_str.is_some_and(is_journal_of_registered) {
            tracing::warn!(name = name_str, "refusing a journal on disk: use journal_mode=MEMORY");
            return ffi::SQLITE_CANTOPEN;
        }
        let Some(default) = default_vfs() else {
            return ffi::SQLITE_CANTOPEN;
        };
        // SAFETY: the default VFS's xOpen, given the same arguments; `szOsFile` is at least its own.
        match unsafe { (*default).xOpen } {
            // SAFETY: as above.
            Some(open) => unsafe { open(default, name, file, flags, out_flags) },
            None => ffi::SQLITE_CANTOPEN,
        }
    })
}

unsafe extern "C" fn x_delete(_vfs: *mut ffi::sqlite3_vfs, name: *const c_char, sync_dir: c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_DELETE, || {
        // SAFETY: SQLite passes a NUL-terminated name that outlives the call.
        let name_str = unsafe { name_str(name) };
        if name_str.is_some_and(|n| database(n).is_some() || is_journal_of_registered(n)) {
            // Nothing of a registered database is on disk.
            return ffi::SQLITE_OK;
        }
        let Some(default) = default_vfs() else {
            return ffi::SQLITE_IOERR_DELETE;
        };
        // SAFETY: the default VFS's xDelete, given the same arguments.
        match unsafe { (*default).xDelete } {
            // SAFETY: as above.
            Some(delete) => unsafe { delete(default, name, sync_dir) },
            None => ffi::SQLITE_IOERR_DELETE,
        }
    })
}

unsafe extern "C" fn x_access(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    flags: c_int,
    result: *mut c_int,
) -> c_int {
    guard(ffi::SQLITE_IOERR_ACCESS, || {
        // SAFETY: SQLite passes a NUL-terminated name that outlives the call.
        let name_str = unsafe { name_str(name) };
        let answer = match name_str {
            Some(n) if database(n).is_some() => Some(1),
            // No hot journal can exist: journals of registered databases are never on disk.
            Some(n) if is_journal_of_registered(n) => Some(0),
            _ => None,
        };
        if let Some(answer) = answer {
            // SAFETY: SQLite passes a valid out-pointer.
            unsafe { *result = answer };
            return ffi::SQLITE_OK;
        }
        let Some(default) = default_vfs() else {
            return ffi::SQLITE_IOERR_ACCESS;
        };
        // SAFETY: the default VFS's xAccess, given the same arguments.
        match unsafe { (*default).xAccess } {
            // SAFETY: as above.
            Some(access) => unsafe { access(default, name, flags, result) },
            None => ffi::SQLITE_IOERR_ACCESS,
        }
    })
}

unsafe extern "C" fn x_full_pathname(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    out_len: c_int,
    out: *mut c_char,
) -> c_int {
    guard(ffi::SQLITE_CANTOPEN, || {
        // SAFETY: SQLite passes a NUL-terminated name that outlives the call.
        let name_str = unsafe { name_str(name) };
        if name_str.is_some_and(|n| database(n).is_some()) {
            // A registered name is a registry key, not a path: kept as it is.
            // SAFETY: non-null (it matched) and NUL-terminated.
            let bytes = unsafe { CStr::from_ptr(name) }.to_bytes_with_nul();
            if usize::try_from(out_len).map_or(true, |capacity| bytes.len() > capacity) {
                return ffi::SQLITE_CANTOPEN;
            }
            // SAFETY: `out` holds `out_len` bytes, at least `bytes.len()`; the two do not overlap.
            unsafe { ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), out, bytes.len()) };
            return ffi::SQLITE_OK;
        }
        let Some(default) = default_vfs() else {
            return ffi::SQLITE_CANTOPEN;
        };
        // SAFETY: the default VFS's xFullPathname, given the same arguments.
        match unsafe { (*default).xFullPathname } {
            // SAFETY: as above.
            Some(full_pathname) => unsafe { full_pathname(default, name, out_len, out) },
            None => ffi::SQLITE_CANTOPEN,
        }
    })
}

unsafe extern "C" fn x_randomness(_vfs: *mut ffi::sqlite3_vfs, len: c_int, out: *mut c_char) -> c_int {
    guard(0, || {
        let Some(default) = default_vfs() else { return 0 };
        // SAFETY: the default VFS's xRandomness, given the same arguments.
        match unsafe { (*default).xRandomness } {
            // SAFETY: as above.
            Some(randomness) => unsafe { randomness(default, len, out) },
            None => 0,
        }
    })
}

unsafe extern "C" fn x_sleep(_vfs: *mut ffi::sqlite3_vfs, microseconds: c_int) -> c_int {
    guard(0, || {
        let duration = std::time::Duration::from_micros(u64::try_from(microseconds).unwrap_or(0));
        std::thread::sleep(duration);
        microseconds
    })
}

unsafe extern "C" fn x_current_time(_vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    guard(ffi::SQLITE_ERROR, || {
        let Some(default) = default_vfs() else {
            return ffi::SQLITE_ERROR;
        };
        // SAFETY: the default VFS's xCurrentTime, given the same arguments.
        match unsafe { (*default).xCurrentTime } {
            // SAFETY: as above.
            Some(current_time) => unsafe { current_time(default, out) },
            None => ffi::SQLITE_ERROR,
        }
    })
}

unsafe extern "C" fn x_current_time_int64(_vfs: *mut ffi::sqlite3_vfs, out: *mut ffi::sqlite3_int64) -> c_int {
    guard(ffi::SQLITE_ERROR, || {
        let Some(default) = default_vfs() else {
            return ffi::SQLITE_ERROR;
        };
        // SAFETY: the default VFS's xCurrentTimeInt64 (its iVersion >= 2 checked first), same arguments.
        let current_time = unsafe {
            ((*default).iVersion >= 2)
                .then_some((*default).xCurrentTimeInt64)
                .flatten()
        };
        match current_time {
            // SAFETY: as above.
            Some(current_time) => unsafe { current_time(default, out) },
            None => ffi::SQLITE_ERROR,
        }
    })
}

unsafe extern "C" fn x_get_last_error(_vfs: *mut ffi::sqlite3_vfs, len: c_int, out: *mut c_char) -> c_int {
    guard(0, || {
        let Some(default) = default_vfs() else { return 0 };
        // SAFETY: the default VFS's xGetLastError, given the same arguments.
        match unsafe { (*default).xGetLastError } {
            // SAFETY: as above.
            Some(get_last_error) => unsafe { get_last_error(default, len, out) },
            None => 0,
        }
    })
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    guard(ffi::SQLITE_IOERR_CLOSE, || {
        // SAFETY: SQLite closes a file it opened through `x_open` exactly once.
        let object = unsafe { &mut *file.cast::<FileObject>() };
        let main = std::mem::replace(&mut object.main, ptr::null_mut());
        if !main.is_null() {
            // SAFETY: from `Box::into_raw` in `x_open`, freed here only, once (nulled above).
            drop(unsafe { Box::from_raw(main) });
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_read(file: *mut ffi::sqlite3_file, buf: *mut c_void, amount: c_int, offset: i64) -> c_int {
    guard(ffi::SQLITE_IOERR_READ, || {
        // SAFETY: SQLite calls io methods only on files `x_open` opened, one call at a time.
        let Some(main) = (unsafe { main_file(file) }) else {
            return ffi::SQLITE_IOERR_READ;
        };
        let (Ok(len), Ok(offset)) = (usize::try_from(amount), u64::try_from(offset)) else {
            return ffi::SQLITE_IOERR_READ;
        };
        if buf.is_null() {
            return ffi::SQLITE_IOERR_READ;
        }
        // SAFETY: SQLite passes a writable buffer of `amount` bytes that nothing else uses during the call.
        let buf = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
        match main.read(buf, offset) {
            Ok(ReadOutcome::Full) => ffi::SQLITE_OK,
            Ok(ReadOutcome::Short) => ffi::SQLITE_IOERR_SHORT_READ,
            Err(error) => {
                tracing::error!(%error, offset, len, "read of the main file failed");
                note_store_error(&error);
                ffi::SQLITE_IOERR_READ
            }
        }
    })
}

unsafe extern "C" fn x_write(file: *mut ffi::sqlite3_file, buf: *const c_void, amount: c_int, offset: i64) -> c_int {
    guard(ffi::SQLITE_IOERR_WRITE, || {
        // SAFETY: SQLite calls io methods only on files `x_open` opened, one call at a time.
        let Some(main) = (unsafe { main_file(file) }) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        let (Ok(len), Ok(offset)) = (usize::try_from(amount), u64::try_from(offset)) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        if buf.is_null() {
            return ffi::SQLITE_IOERR_WRITE;
        }
        // SAFETY: SQLite passes a readable buffer of `amount` bytes, unchanged during the call.
        let data = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
        match main.write(data, offset) {
            Ok(()) => ffi::SQLITE_OK,
            Err(error) => {
                tracing::error!(%error, offset, len, "write of the main file failed");
                note_store_error(&error);
                ffi::SQLITE_IOERR_WRITE
            }
        }
    })
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    guard(ffi::SQLITE_IOERR_TRUNCATE, || {
        // SAFETY: SQLite calls io methods only on files `x_open` opened, one call at a time.
        let Some(main) = (unsafe { main_file(file) }) else {
            return ffi::SQLITE_IOERR_TRUNCATE;
        };
        let Ok(size_bytes) = u64::try_from(size) else {
            return ffi::SQLITE_IOERR_TRUNCATE;
        };
        match main.truncate(size_bytes) {
            Ok(()) => ffi::SQLITE_OK,
            Err(error) => {
                tracing::error!(%error, size_bytes, "truncate of the main file failed");
                note_store_error(&error);
                ffi::SQLITE_IOERR_TRUNCATE
            }
        }
    })
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_FSYNC, || {
        // SAFETY: SQLite calls io methods only on files `x_open` opened, one call at a time.
        let Some(main) = (unsafe { main_file(file) }) else {
            return ffi::SQLITE_IOERR_FSYNC;
        };
        match main.sync() {
            Ok(()) => ffi::SQLITE_OK,
            Err(error) => {
                tracing::error!(%error, "commit failed");
                note_store_error(&error);
                ffi::SQLITE_IOERR_FSYNC
            }
        }
    })
}

unsafe extern "C" fn x_file_size(file: *mut ffi::sqlite3_file, out: *mut ffi::sqlite3_int64) -> c_int {
    guard(ffi::SQLITE_IOERR_FSTAT, || {
        // SAFETY: SQLite calls io methods only on files `x_open` opened, one call at a time.
        let Some(main) = (unsafe { main_file(file) }) else {
            return ffi::SQLITE_IOERR_FSTAT;
        };
        let size_bytes = match main.size_bytes() {
            Ok(size_bytes) => size_bytes,
            Err(error) => {
                tracing::error!(%error, "size of the main file failed");
                note_store_error(&error);
                return ffi::SQLITE_IOERR_FSTAT;
            }
        };
        let Ok(size_bytes) = i64::try_from(size_bytes) else {
            return ffi::SQLITE_IOERR_FSTAT;
        };
        // SAFETY: SQLite passes a valid out-pointer.
        unsafe { *out = size_bytes };
        ffi::SQLITE_OK
    })
}

/// SQLite's lock constant as a `LockLevel`.
fn lock_level(level: c_int) -> Option<LockLevel> {
    match level {
        ffi::SQLITE_LOCK_NONE => Some(LockLevel::None),
        ffi::SQLITE_LOCK_SHARED => Some(LockLevel::Shared),
        ffi::SQLITE_LOCK_RESERVED => Some(LockLevel::Reserved),
        ffi::SQLITE_LOCK_PENDING => Some(LockLevel::Pending),
        ffi::SQLITE_LOCK_EXCLUSIVE => Some(LockLevel::Exclusive),
        _ => None,
    }
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_LOCK, || {
        // SAFETY: SQLite calls io methods only on files `x_open` opened, one call at a time.
        let Some(main) = (unsafe { main_file(file) }) else {
            return ffi::SQLITE_IOERR_LOCK;
        };
        let Some(level) = lock_level(level).filter(|l| *l != LockLevel::None && *l != LockLevel::Pending) else {
            return ffi::SQLITE_IOERR_LOCK;
        };
        match main.lock(level) {
            Ok(()) => ffi::SQLITE_OK,
            Err(LockError::Busy(reason)) => {
                note_busy(reason);
                ffi::SQLITE_BUSY
            }
            Err(LockError::File(error)) => {
                tracing::error!(%error, "taking a snapshot failed");
                note_store_error(&error);
                ffi::SQLITE_IOERR_LOCK
            }
        }
    })
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_UNLOCK, || {
        // SAFETY: SQLite calls io methods only on files `x_open` opened, one call at a time.
        let Some(main) = (unsafe { main_file(file) }) else {
            return ffi::SQLITE_IOERR_UNLOCK;
        };
        let Some(level) = lock_level(level).filter(|l| *l <= LockLevel::Shared) else {
            return ffi::SQLITE_IOERR_UNLOCK;
        };
        main.unlock(level);
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_CHECKRESERVEDLOCK, || {
        // SAFETY: SQLite calls io methods only on files `x_open` opened, one call at a time.
        let Some(main) = (unsafe { main_file(file) }) else {
            return ffi::SQLITE_IOERR_CHECKRESERVEDLOCK;
        };
        let reserved = c_int::from(main.is_reserved());
        // SAFETY: SQLite passes a valid out-pointer.
        unsafe { *out = reserved };
        ffi::SQLITE_OK
    })
}

/// Our own file-control opcode (far above SQLite's `SQLITE_FCNTL_*`): writes the store's latest commit LSN
/// (see [`PageStore::snapshot`](crate::page_store::PageStore::snapshot)) to the `u64` at `arg`.
const FCNTL_LATEST_COMMIT: c_int = 0x4342_0001;

unsafe extern "C" fn x_file_control(file: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    if op != FCNTL_LATEST_COMMIT {
        return ffi::SQLITE_NOTFOUND;
    }
    guard(ffi::SQLITE_IOERR, || {
        // SAFETY: SQLite calls io methods only on files `x_open` opened, one call at a time.
        let Some(main) = (unsafe { main_file(file) }) else {
            return ffi::SQLITE_NOTFOUND;
        };
        match main.latest_commit() {
            Ok(lsn) => {
                // SAFETY: `latest_commit` below passes a pointer to a live `u64`.
                unsafe { *arg.cast::<u64>() = lsn.0 };
                ffi::SQLITE_OK
            }
            Err(_) => ffi::SQLITE_IOERR,
        }
    })
}

/// The latest commit LSN of the store behind `conn`'s main database, if it is one of ours (and the store
/// answers): it moves with every commit of any connection to that database.
pub(super) fn latest_commit(conn: &rusqlite::Connection) -> Option<u64> {
    let mut lsn: u64 = 0;
    // SAFETY: `conn.handle()` is the open connection's handle, used on this thread only for this call; the
    // out-pointer is a live `u64` that `x_file_control` writes and nothing else keeps.
    let code = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            FCNTL_LATEST_COMMIT,
            (&mut lsn as *mut u64).cast::<c_void>(),
        )
    };
    (code == ffi::SQLITE_OK).then_some(lsn)
}

unsafe extern "C" fn x_sector_size(_file: *mut ffi::sqlite3_file) -> c_int {
    // A page is what the store writes atomically.
    PAGE_SIZE_BYTES as c_int
}

unsafe extern "C" fn x_device_characteristics(_file: *mut ffi::sqlite3_file) -> c_int {
    0
}
