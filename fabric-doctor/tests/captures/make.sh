#!/bin/sh
# Writes the scenario captures of fabric-doctor's tests, in the real tools' formats:
# dcb -j (iproute2 6.1, dcb/*.c), ethtool --json --show-fec (ethtool 6.1, netlink/fec.c),
# ethtool -S / -m text (ethtool 6.1, qsfp.c), MLNX_OFED ecn sysfs (en_sysfs.c).
# Layout: docs/lossless.md "Capture format". Re-run after changing it: sh make.sh
set -eu
cd "$(dirname "$0")"
f() { mkdir -p "$D/fs$(dirname "$1")"; printf '%s\n' "$2" > "$D/fs$1"; }
c() { mkdir -p "$D/cmd"; printf '%s\n' "$2" > "$D/cmd/$1.out"; printf '%s' "${4:-}" > "$D/cmd/$1.err"; printf '%s\n' "${3:-0}" > "$D/cmd/$1.rc"; }
PFC3='{"pfc_cap":8,"macsec_bypass":false,"delay":7,"prio_pfc":[false,false,false,true,false,false,false,false],"requests":[0,0,0,18342,0,0,0,0],"indications":[0,0,0,977,0,0,0,0]}'
APP='{"dscp_prio":['; for d in $(seq 0 63); do p=0; [ $d = 26 ] && p=3; [ $d = 48 ] && p=6; APP="$APP[$d,$p],"; done; APP="${APP%,}]}"
healthy() {
  D=$1; rm -rf "$D"; mkdir -p "$D/fs" "$D/cmd"
  printf '{}\n' > "$D/read-errors.json"
  f /proc/sys/kernel/hostname "$2"
  f /proc/self/limits "Max locked memory         unlimited            unlimited            bytes"
  f /proc/cmdline "BOOT_IMAGE=/vmlinuz root=/dev/sda1 iommu=pt"
  mkdir -p "$D/fs/sys/class/iommu/dmar0" "$D/fs/sys/kernel/iommu_groups/0"; f /sys/kernel/iommu_groups/0/type identity
  I=/sys/class/infiniband/mlx5_0
  f $I/fw_ver 28.39.1002
  f $I/device/uevent "DRIVER=mlx5_core
PCI_SLOT_NAME=0000:3b:00.0"
  f $I/ports/1/link_layer Ethernet
  f $I/ports/1/state "4: ACTIVE"
  f $I/ports/1/rate "200 Gb/sec (4X HDR)"
  f $I/ports/1/gids/0 fe80:0000:0000:0000:0ac0:ebff:fe4a:1b2c
  f $I/ports/1/gids/1 fe80:0000:0000:0000:0ac0:ebff:fe4a:1b2c
  f $I/ports/1/gids/2 0000:0000:0000:0000:0000:ffff:c612:0001
  f $I/ports/1/gids/3 0000:0000:0000:0000:0000:ffff:c612:0001
  f $I/ports/1/gid_attrs/types/0 "IB/RoCE v1"; f $I/ports/1/gid_attrs/types/1 "RoCE v2"
  f $I/ports/1/gid_attrs/types/2 "IB/RoCE v1"; f $I/ports/1/gid_attrs/types/3 "RoCE v2"
  f $I/ports/1/gid_attrs/ndevs/3 eth2; f $I/ports/1/gid_attrs/ndevs/0 eth2
  N=/sys/class/net/eth2
  f $N/mtu 9000; f $N/speed 200000; f $N/carrier_changes 2; f $N/device/uevent "PCI_SLOT_NAME=0000:3b:00.0"
  mkdir -p "$D/fs/sys/class/net/lo"
  for r in np rp; do for p in 0 1 2 3 4 5 6 7; do f $N/ecn/roce_$r/enable/$p 1; done; done
  f $N/ecn/roce_np/cnp_dscp 48; f $N/ecn/roce_np/cnp_802p_prio 6; f $N/ecn/roce_np/min_time_between_cnps 4
  f $N/ecn/roce_rp/rpg_max_rate 0; f $N/ecn/roce_rp/rpg_ai_rate 5; f $N/ecn/roce_rp/rpg_hai_rate 50
  f $N/ecn/roce_rp/rpg_time_reset 300; f $N/ecn/roce_rp/rpg_byte_reset 32767; f $N/ecn/roce_rp/initial_alpha_value 1023
  c "dcb_-V" "dcb utility, iproute2-6.1.0"
  c "ethtool_--version" "ethtool version 6.1"
  c "dcb_-j_pfc_-s_show_dev_eth2" "$PFC3"
  c "dcb_-j_ets_show_dev_eth2" '{"willing":false,"ets_cap":8,"cbs":false,"tc_bw":[0,0,0,50,0,0,50,0],"pg_bw":[0,0,0,0,0,0,0,0],"tc_tsa":["ets","ets","ets","ets","ets","ets","ets","ets"],"prio_tc":[0,1,2,3,4,5,6,7],"reco_tc_bw":[0,0,0,0,0,0,0,0],"reco_tc_tsa":["strict","strict","strict","strict","strict","strict","strict","strict"],"reco_prio_tc":[0,0,0,0,0,0,0,0]}'
  c "dcb_-j_app_show_dev_eth2" "$APP"
  c "dcb_-j_dcbx_show_dev_eth2" '{"host":true,"ieee":true}'
  c "dcb_-j_buffer_show_dev_eth2" '{"prio_buffer":[0,0,0,1,0,0,0,0],"buffer_size":[130944,130944,0,0,0,0,0,0],"total_size":1048576}'
  c "ethtool_--json_-I_--show-fec_eth2" '[ {
        "ifname": "eth2",
        "config": [ "Auto" ],
        "active": [ "RS" ],
        "statistics": {
            "corrected_blocks": { "total": 1234 },
            "uncorrectable_blocks": { "total": 0 },
            "corrected_bits": { "total": 2468 }
        }
    } ]'
  c "ethtool_-S_eth2" "NIC statistics:
     rx_packets: 102938475
     tx_packets: 99837261
     rx_discards_phy: 0
     tx_discards_phy: 0
     rx_prio3_pause: 977
     tx_prio3_pause: 18342
     rx_prio3_discards: 0
     rx_corrected_bits_phy: 2468
     rx_pcs_symbol_err_phy: 0
     link_down_events_phy: 1"
  c "ethtool_-m_eth2" "	Identifier                                : 0x11 (QSFP28)
	Vendor name                               : Mellanox
	Vendor PN                                 : MMA1T00-HS
	Module temperature                        : 45.30 degrees C / 113.54 degrees F
	Rcvr signal avg optical power(Channel 1)  : 0.9720 mW / -0.12 dBm
	Rcvr signal avg optical power(Channel 2)  : 0.9798 mW / -0.09 dBm
	Rcvr signal avg optical power(Channel 3)  : 1.1340 mW / 0.55 dBm
	Rcvr signal avg optical power(Channel 4)  : 1.1340 mW / 0.55 dBm
	Laser rx power high alarm threshold       : 5.4954 mW / 7.40 dBm
	Laser rx power low alarm threshold        : 0.0407 mW / -13.90 dBm
	Laser rx power high warning threshold     : 2.7542 mW / 4.40 dBm
	Laser rx power low warning threshold      : 0.0813 mW / -10.90 dBm"
}
healthy healthy node01
healthy pfc-off node02; D=pfc-off; c "dcb_-j_pfc_-s_show_dev_eth2" '{"pfc_cap":8,"macsec_bypass":false,"delay":7,"prio_pfc":[false,false,false,false,false,false,false,false],"requests":[0,0,0,0,0,0,0,0],"indications":[0,0,0,0,0,0,0,0]}'
healthy pfc-wrong-priority node03; D=pfc-wrong-priority; c "dcb_-j_pfc_-s_show_dev_eth2" '{"pfc_cap":8,"macsec_bypass":false,"delay":7,"prio_pfc":[false,false,false,false,true,false,false,false],"requests":[0,0,0,0,0,0,0,0],"indications":[0,0,0,0,0,0,0,0]}'
healthy trust-pcp node04; D=trust-pcp; c "dcb_-j_app_show_dev_eth2" '{}'
healthy ecn-off node05; D=ecn-off; f /sys/class/net/eth2/ecn/roce_np/enable/3 0
healthy cnp-dscp node06; D=cnp-dscp; f /sys/class/net/eth2/ecn/roce_np/cnp_dscp 46
healthy fec-off node07; D=fec-off; c "ethtool_--json_-I_--show-fec_eth2" '[ { "ifname": "eth2", "config": [ "Off" ], "active": [ "Off" ] } ]'
healthy rx-power-low node08; D=rx-power-low; sed -i 's|(Channel 3)  : 1.1340 mW / 0.55 dBm|(Channel 3)  : 0.0891 mW / -10.50 dBm|' rx-power-low/cmd/ethtool_-m_eth2.out
healthy no-dcb node09; D=no-dcb; rm -f no-dcb/cmd/dcb_*; printf 'error: dcb is not installed (not found in PATH)\n' > no-dcb/cmd/dcb_-V.rc; : > no-dcb/cmd/dcb_-V.out; : > no-dcb/cmd/dcb_-V.err
# A netdev without DCB (virtio, this machine's real answers: iproute2 6.1, ethtool 6.1).
healthy not-dcb-capable node10; D=not-dcb-capable
for q in "pfc_-s" ets app dcbx buffer; do c "dcb_-j_${q}_show_dev_eth2" "" 1 "Attribute read: Operation not supported
"; done
c "ethtool_--json_-I_--show-fec_eth2" "[ ]" 1 "netlink error: Operation not supported
"
c "ethtool_-m_eth2" "" 1 "netlink error: Operation not supported
"
rm -rf not-dcb-capable/fs/sys/class/net/eth2/ecn
# An InfiniBand HCA (mlx5_0, port 1) in scenario $1 on host $2, no netdev yet.
ib_host() {
  D=$1; rm -rf $D; mkdir -p $D/fs $D/cmd; printf '{}\n' > $D/read-errors.json
  f /proc/sys/kernel/hostname "$2"
  f /proc/self/limits "Max locked memory         unlimited            unlimited            bytes"
  f /proc/cmdline "BOOT_IMAGE=/vmlinuz iommu=pt"
  I=/sys/class/infiniband/mlx5_0
  f $I/fw_ver 28.39.1002; f $I/device/uevent "PCI_SLOT_NAME=0000:3b:00.0"
  f $I/ports/1/link_layer InfiniBand; f $I/ports/1/gids/0 fe80:0000:0000:0000:0ac0:eb03:004a:1b2c
  c "dcb_-V" "dcb utility, iproute2-6.1.0"; c "ethtool_--version" "ethtool version 6.1"
}
# InfiniBand: no netdev (no IPoIB), PMA only.
ib_host infiniband node11
# A management port beside the RoCE NIC (issue 37 item 5): device-backed and DCB-capable,
# PFC off and no DSCP map, no RDMA device. It carries no RDMA traffic: reported, not judged.
healthy management-port node12; D=management-port
M=/sys/class/net/eno1
f $M/mtu 1500; f $M/speed 25000; f $M/carrier_changes 1; f $M/device/uevent "PCI_SLOT_NAME=0000:01:00.0"
c "dcb_-j_pfc_-s_show_dev_eno1" '{"pfc_cap":8,"macsec_bypass":false,"delay":0,"prio_pfc":[false,false,false,false,false,false,false,false],"requests":[0,0,0,0,0,0,0,0],"indications":[0,0,0,0,0,0,0,0]}'
c "dcb_-j_app_show_dev_eno1" '{}'
c "ethtool_--json_-I_--show-fec_eno1" '[ { "ifname": "eno1", "config": [ "Off" ], "active": [ "Off" ] } ]'
# The NIC's own traffic class (issue 37 item 7): MLNX_OFED's global tclass 106 and rdma_cm's
# default ToS 106, both as att/netarbiter's setup-nic-lossless-layer3.sh sets them beside
# trust dscp and PFC on priority 3 (the file's real forms: tests/corpus/real-outputs/
# mlx5-traffic-class/). Whatever class the QPs ask, the kernel gives them 106 (DSCP 26).
healthy global-tclass node13; D=global-tclass
f /sys/class/infiniband/mlx5_0/tc/1/traffic_class "Global tclass=106"
f /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos 106
# RoCE on a VLAN over a bond of two PFs (issue 37 item 6): the GID's netdev is bond0.200,
# whose lower is bond0, whose lowers are eth2 and eth3 (the kernel's lower_* links,
# Documentation/ABI/testing/sysfs-class-net). DCB, FEC, counters and optics are the PFs'.
healthy vlan-on-bond node14; D=vlan-on-bond
f /sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/3 bond0.200
f /sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0 bond0.200
f /sys/class/net/bond0.200/mtu 9000
f /sys/class/net/bond0/mtu 9000
# sysfs's lower_* entries are symlinks to the lower's directory; so they are here (git
# keeps a symlink, not an empty directory).
ln -s ../bond0 "$D/fs/sys/class/net/bond0.200/lower_bond0"
ln -s ../eth2 "$D/fs/sys/class/net/bond0/lower_eth2"
ln -s ../eth3 "$D/fs/sys/class/net/bond0/lower_eth3"
cp -r "$D/fs/sys/class/net/eth2" "$D/fs/sys/class/net/eth3"
f /sys/class/net/eth3/device/uevent "PCI_SLOT_NAME=0000:3b:00.1"
for x in "$D"/cmd/*_eth2.*; do cp "$x" "${x%_eth2.*}_eth3.${x##*.}"; done
sed -i 's/"eth2"/"eth3"/' "$D/cmd/ethtool_--json_-I_--show-fec_eth3.out"
# eth3's PFC is off: the second leg of the bond fails on its own, named by its name.
c "dcb_-j_pfc_-s_show_dev_eth3" '{"pfc_cap":8,"macsec_bypass":false,"delay":7,"prio_pfc":[false,false,false,false,false,false,false,false],"requests":[0,0,0,0,0,0,0,0],"indications":[0,0,0,0,0,0,0,0]}'
# InfiniBand with IPoIB (issue 37 item 15): the HCA's netdev ib0 is IPoIB, whose ethtool
# operations (mlx5's ipoib/ethtool.c) have no FEC and no module EEPROM: both unknown with
# where to read them instead (mlxlink), never a guess; its statistics are read.
ib_host ipoib node15
# (a file in it, so git keeps the directory: ARPHRD_INFINIBAND)
f $I/device/net/ib0/type 32
N=/sys/class/net/ib0
f $N/mtu 4092; f $N/speed 200000; f $N/carrier_changes 1; f $N/device/uevent "PCI_SLOT_NAME=0000:3b:00.0"
c "ethtool_--json_-I_--show-fec_ib0" "" 1 "netlink error: Operation not supported
"
c "ethtool_-S_ib0" "NIC statistics:
     rx_packets: 1882
     rx_bytes: 160394
     tx_packets: 1903
     tx_bytes: 159862"
c "ethtool_-m_ib0" "" 1 "Cannot get module EEPROM information: Operation not supported
"
# ethtool 6.14 (issue 37 item 9): `-m` text is still printed, with the thresholds in four
# decimals of mW and in dBm, while `--json -m` rounds them to two decimals of mW (0.08 mW is
# -10.97 dBm where the module says -10.90). The text is read; the JSON is there, unused.
healthy ethtool-6.14 node16; D=ethtool-6.14
c "ethtool_--version" "ethtool version 6.14"
c "ethtool_--json_-m_eth2" '[ {
        "identifier": 17,
        "identifier_description": "QSFP28",
        "vendor_name": "Mellanox",
        "vendor_pn": "MMA1T00-HS",
        "module_temperature": 45.3,
        "rx_power": { "values": [ 0.97, 0.98, 1.13, 1.13 ], "type": "Rcvr signal avg optical power" },
        "laser_rx_power": { "high_alarm_threshold": 5.50, "low_alarm_threshold": 0.04, "high_warning_threshold": 2.75, "low_warning_threshold": 0.08 }
    } ]'
# RoCE on a tenant's VLAN in its VRF (issue 32 item 3): the GID's netdev is eth2.101 above
# eth2, enslaved to vrf-acme (table 101); `ip -d -j link show dev eth2.101` is the real
# output in tests/corpus/real-outputs/ip-link/vlan101-in-vrf.json with sr0 read as eth2.
healthy tenant-vlan node17; D=tenant-vlan
f /sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/3 eth2.101
f /sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0 eth2.101
f /sys/class/net/eth2.101/mtu 9000
ln -s ../eth2 "$D/fs/sys/class/net/eth2.101/lower_eth2"
c "ip_-d_-j_link_show_dev_eth2.101" "$(sed 's/sr0/eth2/g' ../../../tests/corpus/real-outputs/ip-link/vlan101-in-vrf.json)"
