//! errno values in messages: `Operation not supported (EOPNOTSUPP)`, the text a user can
//! search for and the symbol the man pages use. Linux numbering; no libc needed, so the
//! diagnostics that name errnos build without the verbs feature too.

/// Linux errno values the messages name.
pub const EPERM: i32 = 1;
pub const ENOENT: i32 = 2;
pub const EIO: i32 = 5;
pub const EBADF: i32 = 9;
pub const EAGAIN: i32 = 11;
pub const ENOMEM: i32 = 12;
pub const EACCES: i32 = 13;
pub const EFAULT: i32 = 14;
pub const EBUSY: i32 = 16;
pub const ENODEV: i32 = 19;
pub const EINVAL: i32 = 22;
pub const ENOSPC: i32 = 28;
pub const ENOSYS: i32 = 38;
pub const EPROTONOSUPPORT: i32 = 93;
pub const EOPNOTSUPP: i32 = 95;
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
