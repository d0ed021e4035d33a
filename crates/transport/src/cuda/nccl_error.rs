//! What an NCCL failure says. cudarc's `NcclError` prints as the bare word "NcclError"
//! (its `Debug` drops the `ncclResult_t`), and first runs fail mostly for environment
//! reasons (the bootstrap interface, "Duplicate GPU detected", IB or GDR setup) that only
//! NCCL's own words explain. So every failure names:
//! - the result code, by name and number (`ncclInvalidUsage (5)`);
//! - `ncclGetErrorString(code)`: NCCL's one-line text for the code;
//! - `ncclGetLastError(comm)`: the last WARN line NCCL produced (often the real reason:
//!   "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000");
//! - the hint that `NCCL_DEBUG=WARN` (or `INFO`) prints NCCL's reasoning as it runs.
//!
//! The formatting is a pure function of the code and the two strings, so it is tested
//! without NCCL; [`describe`] fills the strings in from the loaded library. Where the
//! library gives no text, [`fallback_text`] holds NCCL 2.30's `ncclGetErrorString` table
//! (src/init.cc), so the message never goes blank.

use cudarc::nccl::sys::ncclResult_t;

/// NCCL's numeric result code (the ABI value, stable across NCCL versions).
pub fn code_number(code: ncclResult_t) -> u32 {
    code as u32
}

/// NCCL's own text for `code`, as `ncclGetErrorString` returns it in NCCL 2.30 (used when
/// the library's answer is unavailable).
pub fn fallback_text(code: ncclResult_t) -> &'static str {
    use ncclResult_t::*;
    match code {
        ncclSuccess => "no error",
        ncclUnhandledCudaError => "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        ncclSystemError => "unhandled system error (run with NCCL_DEBUG=INFO for details)",
        ncclInternalError => "internal error - please report this issue to the NCCL developers",
        ncclInvalidArgument => "invalid argument (run with NCCL_DEBUG=WARN for details)",
        ncclInvalidUsage => "invalid usage (run with NCCL_DEBUG=WARN for details)",
        ncclRemoteError => "remote process exited or there was a network error",
        ncclInProgress => "NCCL operation in progress",
        ncclTimeout => "NCCL operation timed out",
        ncclNumResults => "unknown result code",
    }
}

/// What to look at first for `code`: the environment causes each code usually has on a
/// first run.
fn next_step(code: ncclResult_t) -> &'static str {
    use ncclResult_t::*;
    match code {
        ncclInvalidUsage => {
            "often two ranks on one GPU (\"Duplicate GPU detected\": set FABCHECK_CUDA_DEVICE \
             or run one rank per GPU) or a call the communicator's ranks disagree on"
        }
        ncclSystemError => {
            "a system call failed: usually the bootstrap network (set NCCL_SOCKET_IFNAME to \
             the interface the hosts reach each other on) or shared memory (/dev/shm too small)"
        }
        ncclRemoteError => {
            "a peer rank died or the network failed: see the first error of the other ranks, \
             and the NIC's counters"
        }
        ncclUnhandledCudaError => "a CUDA call inside NCCL failed: check the GPU with nvidia-smi",
        ncclTimeout => "a peer did not answer in time: check that every rank is running",
        _ => "",
    }
}

/// The message of one failed NCCL call: `what` failed, the code by name and number, NCCL's
/// text for it (`error_string`, or the built-in table), its last error if any, the next
/// step and the `NCCL_DEBUG=WARN` hint.
pub fn message(
    what: &str,
    code: ncclResult_t,
    error_string: Option<&str>,
    last_error: Option<&str>,
) -> String {
    let text = error_string
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| fallback_text(code));
    let mut m = format!(
        "{what}: NCCL error {code:?} ({}): {text}",
        code_number(code)
    );
    if let Some(last) = last_error.map(str::trim).filter(|s| !s.is_empty()) {
        m.push_str(&format!("; NCCL's last error: {last}"));
    }
    let step = next_step(code);
    if !step.is_empty() {
        m.push_str(&format!("; {step}"));
    }
    m.push_str("; run with NCCL_DEBUG=WARN (or NCCL_DEBUG=INFO) to see NCCL's own reasons");
    m
}

/// [`message`] with the strings from the loaded NCCL: `ncclGetErrorString(code)` and
/// `ncclGetLastError(comm)` (`comm` may be null: NCCL keeps the last error per process
/// too). Call only after an NCCL call failed, so the library is loaded.
pub(crate) fn describe(
    what: &str,
    code: ncclResult_t,
    comm: cudarc::nccl::sys::ncclComm_t,
) -> String {
    use cudarc::nccl::sys as ncclsys;
    let read = |p: *const std::ffi::c_char| {
        // SAFETY: NCCL returns NUL-terminated strings it owns (static, or its per-process
        // last-error buffer); they are copied at once.
        (!p.is_null()).then(|| {
            // SAFETY: a non-null, NUL-terminated string NCCL owns, copied at once (see above).
            unsafe { std::ffi::CStr::from_ptr(p) }
                .to_string_lossy()
                .into_owned()
        })
    };
    // SAFETY: an NCCL call just failed, so the library is loaded (cudarc's loader does
    // not panic here); both functions only read their arguments.
    let (es, last) = unsafe {
        (
            read(ncclsys::ncclGetErrorString(code)),
            read(ncclsys::ncclGetLastError(comm)),
        )
    };
    message(what, code, es.as_deref(), last.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ncclResult_t::*;

    #[test]
    fn a_code_is_named_with_its_number_text_and_the_debug_hint() {
        let m = message(
            "creating the NCCL communicator",
            ncclInvalidUsage,
            None,
            None,
        );
        assert!(
            m.starts_with(
                "creating the NCCL communicator: NCCL error ncclInvalidUsage (5): invalid usage"
            ),
            "{m}"
        );
        assert!(m.contains("Duplicate GPU detected"), "{m}");
        assert!(m.contains("NCCL_DEBUG=WARN"), "{m}");
        assert!(!m.contains("NcclError"), "{m}");
    }

    #[test]
    fn the_library_text_and_last_error_are_shown_when_given() {
        let m = message(
            "ncclAllReduce",
            ncclRemoteError,
            Some("remote process exited or there was a network error"),
            Some("NET/IB : Got completion from peer 10.0.0.2 with status=12 opcode=0"),
        );
        assert!(
            m.contains("ncclRemoteError (6): remote process exited"),
            "{m}"
        );
        assert!(
            m.contains("NCCL's last error: NET/IB : Got completion"),
            "{m}"
        );
        // An empty last error (NCCL's answer when nothing went wrong) adds nothing.
        let m = message("ncclSend", ncclSystemError, None, Some(""));
        assert!(
            m.contains("ncclSystemError (2): unhandled system error"),
            "{m}"
        );
        assert!(!m.contains("last error"), "{m}");
        assert!(m.contains("NCCL_SOCKET_IFNAME"), "{m}");
    }

    #[test]
    fn every_code_has_a_number_and_text() {
        let all = [
            ncclSuccess,
            ncclUnhandledCudaError,
            ncclSystemError,
            ncclInternalError,
            ncclInvalidArgument,
            ncclInvalidUsage,
            ncclRemoteError,
            ncclInProgress,
            ncclTimeout,
        ];
        for (i, c) in all.into_iter().enumerate() {
            assert_eq!(code_number(c), i as u32, "{c:?}");
            assert!(!fallback_text(c).is_empty());
        }
    }
}
