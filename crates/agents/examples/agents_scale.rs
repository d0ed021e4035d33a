//! The agents' coordinator at scale, without measuring: N simulated agents (default 1024)
//! in this process speak the real protocol over real loopback sockets (handshake with the
//! secret, sweep order, a report per round: the initiator of each pair reports a
//! bandwidth row), and the real coordinator (`agents::conduct`) sweeps them all-pairs.
//! What it prints is the control plane's own cost: enlisting every agent, and each
//! round's orchestration (sending every go, waiting for every report, recording).
//! Run: `cargo run --release --example agents_scale -p agents [AGENTS] [PATTERN]`.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::io::Write;
use std::time::Instant;

use anyhow::Result;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use agents::proto::{
    AgentHello, AgentMsg, AuthReply, Command, CoordAuth, CoordHello, Welcome, PROTOCOL,
};
use agents::secret::{self, Secret};
use p2p::coordinator::RoundReport;
use p2p::{self, PairTool, Plan, SizeRun};
use results::{BandwidthResult, BandwidthSummary, CpuUse, HostInfo, TestResult};

async fn recv<T: serde::de::DeserializeOwned>(s: &mut TcpStream) -> Option<T> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).await.ok()?;
    let len = u32::from_be_bytes([h[4], h[5], h[6], h[7]]) as usize;
    let mut p = vec![0u8; len];
    s.read_exact(&mut p).await.ok()?;
    serde_json::from_slice(&p).ok()
}

async fn send<T: serde::Serialize>(s: &mut TcpStream, v: &T) -> Option<()> {
    let p = serde_json::to_vec(v).ok()?;
    let mut f = b"FBCK".to_vec();
    f.extend_from_slice(&(p.len() as u32).to_be_bytes());
    f.extend_from_slice(&p);
    s.write_all(&f).await.ok()
}

/// The schedule every agent computes for itself from the same order; here, where all the
/// agents share one thread, it is computed once for all (a real agent does it on its own
/// node: about 50 ms for 1024 nodes all-pairs).
static SCHEDULE: std::sync::OnceLock<Option<p2p::pattern::Schedule>> = std::sync::OnceLock::new();

/// One simulated agent: answers the protocol at once; reports a row when it initiates.
async fn agent(listener: TcpListener, i: usize, secret: Secret) -> Option<()> {
    let (mut s, _) = listener.accept().await.ok()?;
    let hello: CoordHello = recv(&mut s).await?;
    let mine = secret::nonce();
    send(
        &mut s,
        &AgentHello::Challenge {
            protocol: PROTOCOL,
            tool: "bench-bw".into(),
            version: results::provenance::TOOL_VERSION.into(),
            nonce: mine,
            proof: secret.proof("agent", &mine, &hello.nonce),
        },
    )
    .await?;
    let auth: CoordAuth = recv(&mut s).await?;
    assert!(secret.verify("coordinator", &hello.nonce, &mine, &auth.proof));
    let host = HostInfo {
        hostname: format!("node{i:04}"),
        ..Default::default()
    };
    let welcome = Welcome {
        host,
        options: [("transport".to_string(), serde_json::json!("tcp"))]
            .into_iter()
            .collect(),
        device: None,
        port: None,
        pair_addr: "127.0.0.1:9".parse().unwrap(),
    };
    send(&mut s, &AuthReply::Welcome(Box::new(welcome))).await?;
    let mut members = Vec::new();
    let mut schedule = None;
    loop {
        match recv::<Command>(&mut s).await? {
            Command::Sweep(order) => {
                let launch = launch(order.pattern.parse().ok()?);
                schedule = SCHEDULE
                    .get_or_init(|| {
                        p2p::driver::schedule_for(&launch, &order.members, &order.shared).ok()
                    })
                    .as_ref();
                members = order.members;
                send(&mut s, &AgentMsg::Ready).await?;
            }
            Command::Round { round, .. } => {
                let mut rep = RoundReport::default();
                if let Some(rp) = schedule
                    .as_ref()
                    .and_then(|sc| sc.pair_of(round as usize, i as u32))
                {
                    if rp.initiator == i as u32 {
                        rep.results.push(row(p2p::driver::pair_of_members(
                            &members,
                            true,
                            rp,
                            Some(round),
                        )));
                    }
                }
                send(&mut s, &AgentMsg::Report(rep)).await?;
            }
            Command::Stop { .. } => {}
            // The scale benchmark times sweeps: a simulated agent takes part in no gang run.
            Command::Incast(_) | Command::Congestion(_) => {
                send(&mut s, &AgentMsg::Refused("a simulated agent".into())).await?;
            }
            Command::Gang(_) => {}
            Command::Done => return Some(()),
        }
    }
}

fn row(pair: results::Pair) -> TestResult {
    TestResult::Bandwidth(BandwidthResult {
        test: "send_bw".into(),
        transport: "tcp".into(),
        size_bytes: 1 << 20,
        iterations: 1000,
        duration_s: 0.5,
        bidirectional: false,
        streams: 1,
        tx_depth: 128,
        cq_mod: None,
        post_list: None,
        bw_gbit_s: BandwidthSummary {
            avg: 97.2,
            peak: 97.5,
            perftest_peak: None,
        },
        msg_rate_mpps: 0.0116,
        interval_s: 0.1,
        interval_gbit_s: vec![97.1, 97.3, 97.2, 97.4, 97.2],
        cpu: CpuUse::default(),
        pair,
        complete: true,
        counters: None,
        check_wrong_bytes: None,
        memory: None,
        setup: None,
        directions: Vec::new(),
        flows: Vec::new(),
    })
}

fn launch(pattern: p2p::pattern::PatternSpec) -> p2p::Launch {
    p2p::Launch {
        host: None,
        port: 0,
        bind_addr: None,
        json: None,
        launcher: base::launcher::Launcher::Auto,
        pattern,
        include_local: false,
        rail_mode: Default::default(),
        devices: Default::default(),
        serve: false,
        hosts: None,
        secret_file: None,
        metrics: None,
        control_addr: None,
        transport: transport::TransportChoice::Auto,
        fabric_plan: None,
        cpu: None,
    }
}

struct Quiet;
impl PairTool for Quiet {
    fn run_size(&mut self, _: &mut SizeRun) -> Result<Option<TestResult>> {
        Ok(None)
    }
    fn print_header(&self, _: &Plan) {}
    fn print_row(&self, _: &TestResult) {}
}

fn main() -> Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1024);
    let pattern = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "all-pairs".into());
    // Three sockets per agent in this one process.
    if let Ok((_, hard)) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
    {
        let _ =
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard);
    }
    let secret = Secret::from_bytes(b"scale-test");
    std::env::set_var(secret::ENV, "scale-test");
    let dir = tempfile::tempdir()?;
    let hosts = dir.path().join("hosts");
    let mut file = std::fs::File::create(&hosts)?;
    let mut listeners = Vec::new();
    for _ in 0..n {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.set_nonblocking(true)?;
        writeln!(file, "127.0.0.1:{}", l.local_addr()?.port())?;
        listeners.push(l);
    }
    drop(file);
    // The simulated agents run on a thread and runtime of their own.
    let agents_secret = secret.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let mut set = tokio::task::JoinSet::new();
            for (i, l) in listeners.into_iter().enumerate() {
                let l = TcpListener::from_std(l).expect("listener");
                set.spawn(agent(l, i, agents_secret.clone()));
            }
            while set.join_next().await.is_some() {}
        });
    });
    let json = dir.path().join("scale.json");
    let mut l = launch(pattern.parse().map_err(anyhow::Error::msg)?);
    l.hosts = Some(hosts);
    l.json = Some(json.clone());
    let plan = Plan {
        tool: "bench-bw",
        test: "send_bw".into(),
        op: transport::Op::Send,
        transport: transport::TransportKind::Tcp,
        sizes: vec![1 << 20],
        iterations: 1000,
        duration_s: None,
        warmup: 0,
        streams: 1,
        tx_depth: 128,
        bidirectional: false,
        timeout: std::time::Duration::from_secs(30),
        verbs: Default::default(),
        extra: Default::default(),
        local: Default::default(),
    };
    let t0 = Instant::now();
    let code = agents::conduct::run(&l, plan, &mut Quiet);
    let total = t0.elapsed().as_secs_f64();
    let doc: results::Document = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    let s = doc.sweep.as_ref().expect("sweep");
    let mut rs = s.round_seconds.clone();
    rs.sort_by(f64::total_cmp);
    let med = rs[rs.len() / 2];
    println!(
        "{n} simulated agents, {pattern}: exit {code}, {} rounds, {} results, total {total:.1} s; \
         per round median {:.2} ms, p90 {:.2} ms, max {:.2} ms (control plane only: go, reports, recording)",
        s.rounds_done,
        doc.results.len(),
        med * 1e3,
        rs[rs.len() * 9 / 10] * 1e3,
        rs[rs.len() - 1] * 1e3
    );
    Ok(())
}
