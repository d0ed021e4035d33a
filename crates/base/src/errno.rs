//! errno values in messages: `Operation not supported (EOPNOTSUPP)`, the text a user can
//! search for and the symbol the man pages use. Linux numbering; no libc needed, so the
//! diagnostics that name errnos build without the verbs feature too.

// Linux errno values the messages name.
/// `EPERM`: Operation not permitted.
pub const EPERM: i32 = 1;
/// `ENOENT`: No such file or directory.
pub const ENOENT: i32 = 2;
/// `EIO`: Input/output error.
pub const EIO: i32 = 5;
/// `EBADF`: Bad file descriptor.
pub const EBADF: i32 = 9;
/// `EAGAIN`: Resource temporarily unavailable.
pub const EAGAIN: i32 = 11;
/// `ENOMEM`: Cannot allocate memory (for verbs: the locked-memory limit).
pub const ENOMEM: i32 = 12;
/// `EACCES`: Permission denied.
pub const EACCES: i32 = 13;
/// `EFAULT`: Bad address.
pub const EFAULT: i32 = 14;
/// `EBUSY`: Device or resource busy.
pub const EBUSY: i32 = 16;
/// `ENODEV`: No such device.
pub const ENODEV: i32 = 19;
/// `EINVAL`: Invalid argument.
pub const EINVAL: i32 = 22;
/// `ENOSPC`: No space left on device (for verbs: a queue or table is full).
pub const ENOSPC: i32 = 28;
/// `ENOSYS`: Function not implemented.
pub const ENOSYS: i32 = 38;
/// `EPROTONOSUPPORT`: Protocol not supported.
pub const EPROTONOSUPPORT: i32 = 93;
/// `EOPNOTSUPP`: Operation not supported.
pub const EOPNOTSUPP: i32 = 95;
/// `ETIMEDOUT`: Connection timed out.
pub const ETIMEDOUT: i32 = 110;

fn symbol(e: i32) -> Option<&'static str> {
    Some(match e {
        EPERM => "EPERM",
        ENOENT => "ENOENT",
        EIO => "EIO",
        EBADF => "EBADF",
        EAGAIN => "EAGAIN",
        ENOMEM => "ENOMEM",
        EACCES => "EACCES",
        EFAULT => "EFAULT",
        EBUSY => "EBUSY",
        ENODEV => "ENODEV",
        EINVAL => "EINVAL",
        ENOSPC => "ENOSPC",
        ENOSYS => "ENOSYS",
        EPROTONOSUPPORT => "EPROTONOSUPPORT",
        EOPNOTSUPP => "EOPNOTSUPP",
        ETIMEDOUT => "ETIMEDOUT",
        _ => return None,
    })
}

/// `strerror` text and symbolic name of an errno value.
pub fn text(e: i32) -> String {
    let t = std::io::Error::from_raw_os_error(e).to_string();
    let t = t.split(" (os error").next().unwrap_or(&t).to_string();
    match symbol(e) {
        Some(name) => format!("{t} ({name})"),
        None => format!("{t} (errno {e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_names_the_code() {
        assert_eq!(text(EINVAL), "Invalid argument (EINVAL)");
        assert!(text(ENOMEM).contains("ENOMEM"));
        assert!(text(EOPNOTSUPP).contains("EOPNOTSUPP"));
        assert!(text(9999).contains("errno 9999"));
    }
}
