//! The `runnel` binary as a child process on an ephemeral port, as a harness in any
//! language runs it (`--listen 127.0.0.1:0`, then the ready line on stdout).

mod common;

use runnel_compat_rust::subprocess::{runnel_bin, RunnelProcess};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_line_names_a_serving_port() -> anyhow::Result<()> {
    let runnel = RunnelProcess::start(&runnel_bin(), &[])?;
    let (ip, port) = runnel.bootstrap().rsplit_once(':').unwrap();
    assert_eq!(ip, "127.0.0.1");
    assert_ne!(port, "0");
    common::round_trip(runnel.bootstrap(), "subprocess-round-trip", 20).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_side_by_side() -> anyhow::Result<()> {
    let a = RunnelProcess::start(&runnel_bin(), &[])?;
    let b = RunnelProcess::start(&runnel_bin(), &["--num-partitions", "3"])?;
    assert_ne!(a.bootstrap(), b.bootstrap());
    common::produce(a.bootstrap(), "side-by-side", 1).await?;
    common::produce(b.bootstrap(), "side-by-side", 1).await?;
    assert!(b.data_dir().join("data/side-by-side-2").is_dir());
    assert!(!a.data_dir().join("data/side-by-side-1").exists());
    Ok(())
}
