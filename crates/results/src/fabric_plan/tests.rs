use super::*;

const NATIVE: &str = r#"
version = 1
name = "two groups"

[[switch]]
name = "leaf-r0-g0"
tier = "leaf"
group = "g0"
rail = 0
rack = "rack01"

[[switch]]
name = "spine0"
tier = "spine"

[[node]]
name = "g0n0"
group = "g0"
rack = "rack01"

[[nic]]
node = "g0n0"
nic = "rail0"
rail = 0
switch = "leaf-r0-g0"
port = "swp1"

[[link]]
a = "leaf-r0-g0"
b = "spine0"
count = 2
"#;

#[test]
fn native_plan_reads_every_table() {
    let p = parse("p.toml", NATIVE, Format::Native).unwrap();
    assert_eq!(p.name.as_deref(), Some("two groups"));
    assert_eq!(p.switch.len(), 2);
    assert_eq!(p.switch[0].rail, Some(0));
    assert_eq!(p.nic[0].port.as_deref(), Some("swp1"));
    assert_eq!(p.link[0].count, 2);
    assert_eq!(p.node_names(), ["g0n0"]);
    // The TOML it writes reads back the same.
    let again = parse("again.toml", &p.to_toml(), Format::Native).unwrap();
    assert_eq!(again.switch, p.switch);
    assert_eq!(again.nic, p.nic);
}

fn problem(text: &str) -> String {
    parse("p.toml", text, Format::Native).unwrap_err().0
}

#[test]
fn bad_plans_name_the_item_and_the_next_step() {
    let e = problem(&NATIVE.replace("switch = \"leaf-r0-g0\"", "switch = \"leaf-x\""));
    assert!(
        e.contains("p.toml: nic[0] (g0n0 rail0): unknown switch \"leaf-x\""),
        "{e}"
    );
    assert!(e.contains("add a [[switch]]"), "{e}");
    let dup = format!(
        "{NATIVE}\n[[nic]]\nnode = \"g0n0\"\nnic = \"rail0\"\nrail = 1\nswitch = \"leaf-r0-g0\"\n"
    );
    assert!(problem(&dup).contains("duplicate NIC"), "{}", problem(&dup));
    let e = problem(&NATIVE.replace("tier = \"spine\"", "tier = \"top\""));
    assert!(e.contains("line") && e.contains("leaf, spine, core"), "{e}");
    let e = problem(&NATIVE.replace("version = 1", "version = 3"));
    assert!(e.contains("version = 1"), "{e}");
    let e = problem(&NATIVE.replace("rail = 0\nswitch", "rail = 1\nswitch"));
    assert!(e.contains("serves rail 0"), "{e}");
    let e = problem(&NATIVE.replace("b = \"spine0\"", "b = \"spine9\""));
    assert!(e.contains("link[0]") && e.contains("spine9"), "{e}");
    let e = problem(&NATIVE.replace("count = 2", "count = 0"));
    assert!(e.contains("count 0"), "{e}");
    let e = problem(&NATIVE.replace("count = 2", "count = 2\nrate_gbit_s = -400"));
    assert!(e.contains("link[0]") && e.contains("Gb/s"), "{e}");
    let e = problem(&NATIVE.replace("port = \"swp1\"", "port = \"swp1\"\nrate_gbit_s = nan"));
    assert!(e.contains("nic[0]") && e.contains("not a rate"), "{e}");
    let e = problem(&NATIVE.replace("port = \"swp1\"", "prot = \"swp1\""));
    assert!(
        e.contains("unknown field") && e.contains("docs/structure.md"),
        "{e}"
    );
}

#[test]
fn rates_give_what_a_leaf_carries_across_the_spines() {
    let rated = NATIVE
        .replace("port = \"swp1\"", "port = \"swp1\"\nrate_gbit_s = 400")
        .replace("count = 2", "count = 2\nrate_gbit_s = 100.0");
    let p = parse("p.toml", &rated, Format::Native).unwrap();
    let c = p.leaf_capacity()["leaf-r0-g0"];
    assert_eq!((c.nics, c.nic_gbit_s, c.uplinks_gbit_s), (1, 400.0, 200.0));
    assert_eq!(c.oversubscription(), 2.0);
    assert_eq!(c.flows_at_line_rate(), 1);
    assert_eq!(c.flow_share(), 0.25);
    // The rates survive the TOML round trip.
    let again = parse("again.toml", &p.to_toml(), Format::Native).unwrap();
    assert_eq!(again.leaf_capacity(), p.leaf_capacity());
    // A leaf with a rate left out is unknown.
    assert!(parse("p.toml", NATIVE, Format::Native)
        .unwrap()
        .leaf_capacity()
        .is_empty());
}

#[test]
fn hostlists_expand_like_slurm() {
    assert_eq!(
        expand_hostlist("tux[0-2,5],gpu[08-10],solo").unwrap(),
        ["tux0", "tux1", "tux2", "tux5", "gpu08", "gpu09", "gpu10", "solo"]
    );
    assert!(expand_hostlist("tux[3-1]").is_err());
}

#[test]
fn format_is_told_by_extension_then_content() {
    let p = Path::new("x");
    assert_eq!(Format::detect(Path::new("a.toml"), ""), Format::Native);
    assert_eq!(Format::detect(Path::new("a.csv"), ""), Format::Netbox);
    assert_eq!(
        Format::detect(p, "# c\nSwitchName=s0 Nodes=a"),
        Format::Slurm
    );
    assert_eq!(Format::detect(p, "#\nvendid=0x0\n"), Format::Ibnetdiscover);
    assert_eq!(
        Format::detect(p, "Side A,Termination A,Side B,Termination B"),
        Format::Netbox
    );
    assert_eq!(Format::detect(p, "version = 1"), Format::Native);
}

#[test]
fn switch_and_ca_names_follow_node_descriptions() {
    assert_eq!(
        switch_name("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"),
        "A09-P1-IBLEAF-04-04"
    );
    assert_eq!(switch_name("leaf-r0-g0"), "leaf-r0-g0");
    assert_eq!(
        ca_name("a08-p1-dgx-04-c01 mlx5_5", "H-1"),
        ("a08-p1-dgx-04-c01".into(), "mlx5_5".into())
    );
    assert_eq!(ca_name("lonely", "H-1"), ("lonely".into(), "H-1".into()));
}

#[test]
fn netbox_tiers_are_read_from_words_not_substrings() {
    use super::netbox::switch_tier;
    // Switch names of real fabrics (Selene's capture, topograph's example) by name alone.
    assert_eq!(switch_tier("MSPINE4-01", None), Some(Tier::Spine));
    assert_eq!(switch_tier("CCORE2-002", None), Some(Tier::Core));
    assert_eq!(switch_tier("A09-P1-IBLEAF-04-04", None), Some(Tier::Leaf));
    assert_eq!(switch_tier("A10-P1-IBSPINE-02", None), Some(Tier::Spine));
    assert_eq!(switch_tier("r-ufm-sw95", None), Some(Tier::Leaf));
    // Hosts whose names hold a switch word's letters: Selene's `selene-swift-01`, a
    // storage node (`tor` in `storage`), `ai400x-157`.
    for host in [
        "selene-swift-01",
        "storage01",
        "ai400x-157",
        "selene-cache-02",
    ] {
        assert_eq!(switch_tier(host, None), None, "{host}");
    }
    // A role decides alone: a storage server's role names no switch, whatever its name.
    assert_eq!(switch_tier("sw-storage01", Some("Storage Server")), None);
    assert_eq!(
        switch_tier("LG01-03", Some("Leaf Switch")),
        Some(Tier::Leaf)
    );
    assert_eq!(switch_tier("x", Some("super-spine")), Some(Tier::Core));
}
