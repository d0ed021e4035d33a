//! Framing of the out-of-band control messages exchanged over TCP (standalone handshake,
//! endpoint info, per-test side results). Never used inside a measured loop.
//!
//! A frame is `FBCK` (4 bytes), a big-endian u32 length, then that many bytes of JSON.
//! The magic lets a server tell a fabcheck peer from garbage or a port scanner at the first
//! read; the length is capped so a hostile peer cannot make us allocate gigabytes.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// First bytes of every control frame.
pub const MAGIC: &[u8; 4] = b"FBCK";
/// Largest control frame accepted (documents gathered from a large run fit easily). MPI
/// control messages and each rank's gathered report are held to the same bound.
pub const MAX_FRAME: usize = 64 << 20;
/// Largest memory a decoded control message may take, estimated before it is parsed
/// (`results::limits::decoded_estimate`): a frame of JSON made of tiny values would
/// otherwise decode to thirty times its size.
pub const MAX_DECODED: u64 = 4 * MAX_FRAME as u64;
/// Largest total of the reports rank 0 gathers from every rank.
pub const MAX_GATHERED: usize = 1 << 30;

/// Decodes a control message (a frame, an MPI message, a rank's gathered report) as
/// `T`, refusing one whose decoded form would take more than [`MAX_DECODED`] or that
/// holds a string longer than any result field. Every decoder of bytes from another
/// process goes through here.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    if bytes.len() > MAX_FRAME {
        bail!(
            "a control message of {} bytes, over the {MAX_FRAME}-byte limit",
            bytes.len()
        );
    }
    match results::limits::decoded_estimate_of(bytes) {
        Ok(n) if n > MAX_DECODED => bail!(
            "a control message that would take about {} MiB decoded, over the {} MiB limit",
            n >> 20,
            MAX_DECODED >> 20
        ),
        Err(e) => return Err(e).context("a control message holds a field no fabcheck tool writes"),
        Ok(_) => {}
    }
    serde_json::from_slice(bytes)
        .context("the peer sent a control message this version cannot read")
}

/// Writes one frame.
pub fn send_frame(stream: &mut TcpStream, payload: &[u8]) -> Result<()> {
    if payload.len() > MAX_FRAME {
        bail!(
            "control message of {} bytes exceeds the {MAX_FRAME}-byte limit",
            payload.len()
        );
    }
    let mut header = [0u8; 8];
    header[..4].copy_from_slice(MAGIC);
    header[4..].copy_from_slice(&(payload.len() as u32).to_be_bytes());
    stream
        .write_all(&header)
        .and_then(|_| stream.write_all(payload))
        .and_then(|_| stream.flush())
        .context("sending a control message to the peer")
}

/// Reads one frame, waiting at most `timeout` for each read.
pub fn recv_frame(stream: &mut TcpStream, timeout: Duration) -> Result<Vec<u8>> {
    stream.set_read_timeout(Some(timeout))?;
    let mut header = [0u8; 8];
    read_exact_or_explain(stream, &mut header, timeout)?;
    if &header[..4] != MAGIC {
        bail!(
            "the peer sent bytes that are not a fabcheck control message ({:02x?}): \
             is something other than a fabcheck tool connected to this port?",
            &header[..4]
        );
    }
    let len = u32::from_be_bytes(header[4..].try_into().expect("4 bytes")) as usize;
    if len > MAX_FRAME {
        bail!("the peer announced a {len}-byte control message, over the {MAX_FRAME}-byte limit");
    }
    let mut payload = vec![0u8; len];
    read_exact_or_explain(stream, &mut payload, timeout)?;
    Ok(payload)
}

fn read_exact_or_explain(stream: &mut TcpStream, buf: &mut [u8], timeout: Duration) -> Result<()> {
    match stream.read_exact(buf) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => bail!(
            "the peer sent nothing for {} s (dead, stuck, or not a fabcheck tool); \
             raise --timeout if it is just slow",
            timeout.as_secs_f64()
        ),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
            bail!("the peer closed the connection (it exited or was killed)")
        }
        Err(e) => Err(e).context("reading a control message from the peer"),
    }
}

/// Sends a value as a JSON frame.
pub fn send_json<T: Serialize>(stream: &mut TcpStream, value: &T) -> Result<()> {
    send_frame(stream, &serde_json::to_vec(value)?)
}

/// Receives a JSON frame into `T`.
pub fn recv_json<T: DeserializeOwned>(stream: &mut TcpStream, timeout: Duration) -> Result<T> {
    decode_json(&recv_frame(stream, timeout)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn decoding_is_bounded() {
        let v: serde_json::Value = decode_json(br#"{"x":[1,2]}"#).unwrap();
        assert_eq!(v["x"][1], 2);
        // 30 MiB of zeros would take over 2 GiB as a Value tree.
        let mut zeros = b"[".to_vec();
        zeros.extend(b"0,".repeat(15 << 20));
        zeros.extend(b"0]");
        let e = decode_json::<serde_json::Value>(&zeros).unwrap_err();
        assert!(e.to_string().contains("decoded"), "{e}");
        let long = format!("[\"{}\"]", "x".repeat(2 << 20));
        assert!(decode_json::<serde_json::Value>(long.as_bytes()).is_err());
        assert!(decode_json::<serde_json::Value>(b"{").is_err());
    }

    #[test]
    fn frames_round_trip() {
        let (mut a, mut b) = pair();
        send_json(&mut a, &serde_json::json!({"x": 1})).unwrap();
        let v: serde_json::Value = recv_json(&mut b, Duration::from_secs(1)).unwrap();
        assert_eq!(v["x"], 1);
    }

    #[test]
    fn garbage_silence_and_hangup_are_explained() {
        let (mut a, mut b) = pair();
        a.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let e = recv_frame(&mut b, Duration::from_secs(1)).unwrap_err();
        assert!(
            e.to_string().contains("not a fabcheck control message"),
            "{e}"
        );

        let (_a, mut b) = pair();
        let e = recv_frame(&mut b, Duration::from_millis(100)).unwrap_err();
        assert!(e.to_string().contains("sent nothing"), "{e}");

        let (a, mut b) = pair();
        drop(a);
        let e = recv_frame(&mut b, Duration::from_secs(1)).unwrap_err();
        assert!(e.to_string().contains("closed the connection"), "{e}");
    }

    #[test]
    fn oversized_announcements_are_refused() {
        let (mut a, mut b) = pair();
        let mut h = MAGIC.to_vec();
        h.extend_from_slice(&u32::MAX.to_be_bytes());
        a.write_all(&h).unwrap();
        let e = recv_frame(&mut b, Duration::from_secs(1)).unwrap_err();
        assert!(e.to_string().contains("over the"), "{e}");
    }
}
