#!/usr/bin/env bash
# A director's automation, as a new user writes it in bash against the real binary: 3 public
# pools in 2 zones, 2 VPCs, 40 VMs with 77 NICs, floating IPs, router uplinks and node
# addresses; then deletions, a VPC delete, a reconcile, and `check` clean with the expected
# counts. Run by tests/director.rs in an empty directory with `ipamctl` on PATH; any
# unexpected exit status or count fails it (set -e, and `expect` below).
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
# expect CODE COMMAND...: runs COMMAND, which must exit with CODE.
expect() {
    local want=$1; shift
    local got=0
    "$@" >/tmp/director-out.$$ 2>/tmp/director-err.$$ || got=$?
    [ "$got" -eq "$want" ] || { cat /tmp/director-err.$$ >&2; fail "exit $got, not $want: $*"; }
}
trap 'rm -f /tmp/director-out.$$ /tmp/director-err.$$' EXIT
count() { ipamctl list -A -o name "$@" | wc -l; }
# A VM's uuid, as the hypervisor would report it (deterministic here).
vm_uid() { printf '00000000-0000-4000-8000-%012d' "$1"; }
fip_uid() { printf '00000000-0000-4000-9000-%012d' "$1"; }
# VM i has 2 NICs, except every 13th, which has one: 37 × 2 + 3 = 77 NICs.
nics() { if (( $1 % 13 == 0 )); then echo 1; else echo 2; fi; }

ipamctl init state >/dev/null && cd state

# --- Pools: 3 public pools in 2 zones -------------------------------------------------------
ipamctl apply -f - >/dev/null <<'YAML'
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: pub-a1}
spec: {cidr: 203.0.113.0/27, kind: public, gateway: 203.0.113.1, zone: zone-a}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: pub-a2}
spec: {cidr: 203.0.113.32/27, kind: public, gateway: 203.0.113.33, zone: zone-a}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: pub-b1}
spec: {cidr: 198.51.100.0/26, kind: public, gateway: 198.51.100.1, zone: zone-b}
YAML

# --- 2 VPCs, each with its router's uplink in a public pool ---------------------------------
RED=$(ipamctl vpc create red -n acme/prod --cidr 10.10.0.0/16 2>/dev/null)
BLUE=$(ipamctl vpc create blue -n acme/dev --cidr 10.20.0.0/16 2>/dev/null)
# A retry of a create that succeeded is success and prints the same uid.
[ "$(ipamctl vpc create red -n acme/prod --cidr 10.10.0.0/16 2>/dev/null)" = "$RED" ] || fail "vpc create is not idempotent"
[ "$(ipamctl vpc get red -n acme/prod)" = "$RED" ] || fail "vpc get"
ipamctl allocate pub-a1 --owner VPC/router --uid "$RED" >/dev/null
ipamctl allocate pub-b1 --owner VPC/router --uid "$BLUE" >/dev/null

# --- Subnets (with their gateways reserved) and the hosts' own addresses ---------------------
# red: web 10.10.1.0/24, db 10.10.2.0/24; blue: app 10.20.1.0/24. Gateway: the first host.
claim_red_web() { ipamctl allocate vpc-red -n acme/prod --within 10.10.1.0/24 --reserved 10.10.1.1 "$@"; }
claim_red_db()  { ipamctl allocate vpc-red -n acme/prod --within 10.10.2.0/24 --reserved 10.10.2.1 "$@"; }
claim_blue_app() { ipamctl allocate vpc-blue -n acme/dev --within 10.20.1.0/24 --reserved 10.20.1.1 "$@"; }
claim_red_web --owner Node/10.10.1.0/24 >/dev/null
claim_red_db --owner Node/10.10.2.0/24 >/dev/null
claim_blue_app --owner Node/10.20.1.0/24 >/dev/null

# --- 40 VMs, 77 NICs: VMs 1-25 in red (web, db), 26-40 in blue (app) ------------------------
for i in $(seq 1 40); do
    uid=$(vm_uid "$i")
    for nic in $(seq 0 $(( $(nics "$i") - 1 ))); do
        owner=VirtualMachine/vm-$i/$nic
        if (( i <= 25 )); then
            if (( nic == 0 )); then ip=$(claim_red_web --owner "$owner" --uid "$uid"); else ip=$(claim_red_db --owner "$owner" --uid "$uid"); fi
        else
            ip=$(claim_blue_app --owner "$owner" --uid "$uid")
        fi
        case "$ip" in 10.10.1.1|10.10.2.1|10.20.1.1|*.0|*.255) fail "$owner got $ip, a gateway or network address";; esac
    done
done
# A retried claim gets the same address back.
again=$(claim_red_web --owner VirtualMachine/vm-1/0 --uid "$(vm_uid 1)")
[ "$again" = "$(ipamctl list -n acme/prod --owner VirtualMachine/vm-1/0 -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["items"][0]["spec"]["address"])')" ] || fail "retry got another address"
# A uid must be a UUID: bash's $UID (the user id) is refused, nothing written.
expect 2 ipamctl allocate vpc-red -n acme/prod --owner VirtualMachine/oops/0 --uid "$UID"

# --- Floating IPs: 10 in zone-a (spilling from pub-a1 into pub-a2), 5 in zone-b -------------
for i in $(seq 1 10); do ipamctl allocate --zone zone-a --owner "FloatingIP/fip-$i" --uid "$(fip_uid "$i")" >/dev/null; done
for i in $(seq 11 15); do ipamctl allocate --zone zone-b --owner "FloatingIP/fip-$i" --uid "$(fip_uid "$i")" >/dev/null; done

[ "$(count)" -eq 97 ] || fail "expected 97 allocations (77 NICs, 3 nodes, 2 uplinks, 15 floating IPs), found $(count)"
[ "$(count --kind VirtualMachine)" -eq 77 ] || fail "expected 77 NICs"
ipamctl check 2>/dev/null || fail "check after the claims"

# --- Deletions: 5 VMs (every NIC by uid), 3 floating IPs, then the VPC blue -----------------
for i in 1 2 3 4 5; do ipamctl release --uid "$(vm_uid "$i")" -A >/dev/null; done
for i in 1 2 11; do ipamctl release --owner "FloatingIP/fip-$i" -A >/dev/null; done
[ "$(count)" -eq 84 ] || fail "expected 84 after deleting 5 VMs and 3 floating IPs, found $(count)"
ipamctl vpc delete blue -n acme/dev --dry-run | grep -q '^ipallocation/pub-b1-.* would-release$' || fail "vpc delete --dry-run does not list the uplink"
deleted=$(ipamctl vpc delete blue -n acme/dev)
# 28 NICs of VMs 26-40, its node, its uplink; then its pool.
[ "$(grep -c ' released$' <<<"$deleted")" -eq 30 ] || fail "vpc delete released $(grep -c ' released$' <<<"$deleted"), not 30"
[ "$(ipamctl list -A --uid "$BLUE" -o name | wc -l)" -eq 0 ] || fail "the uplink of blue is still allocated"
expect 3 ipamctl vpc delete blue -n acme/dev                    # gone
expect 0 ipamctl vpc delete blue -n acme/dev --ignore-not-found  # a retry loop's form
[ "$(count)" -eq 54 ] || fail "expected 54 after the VPC delete, found $(count)"

# --- Reconcile: VM 7 was deleted in the hypervisor without a release -------------------------
# Fed hostnames (virsh list --name) by mistake: refused, nothing released.
printf 'vm-6\nvm-8\n' > hostnames.txt
expect 2 ipamctl reconcile --live hostnames.txt --apply
[ "$(count)" -eq 54 ] || fail "reconcile fed hostnames released something"
sleep 1   # the inventory is taken after every claim above (its mtime is when)
{
    for i in 6 $(seq 8 25); do vm_uid "$i"; echo; done
    for i in 3 4 5 6 7 8 9 10 12 13 14 15; do echo "FloatingIP/fip-$i"; done
    echo "Node/10.10.1.0/24"; echo "Node/10.10.2.0/24"
    echo "$RED"
} > live.txt
# Report mode is a CI gate: leaks found is exit 1.
expect 1 ipamctl reconcile --live live.txt --min-age 0
[ "$(grep -c ' leaked$' /tmp/director-out.$$)" -eq 2 ] || fail "expected vm-7's 2 NICs leaked"
grep -q '34 of 34 live lines matched an allocation' /tmp/director-err.$$ || fail "summary: $(cat /tmp/director-err.$$)"
expect 0 ipamctl reconcile --live live.txt --min-age 0 --apply
[ "$(grep -c ' released$' /tmp/director-out.$$)" -eq 2 ] || fail "reconcile --apply did not release vm-7's NICs"
expect 0 ipamctl reconcile --live live.txt --min-age 0

# --- The end state ---------------------------------------------------------------------------
ipamctl check 2>/dev/null || fail "check is not clean"
[ "$(count)" -eq 52 ] || fail "expected 52 allocations at the end, found $(count)"
[ "$(count --kind VirtualMachine)" -eq 37 ] || fail "expected 37 NICs at the end"
[ "$(count --kind FloatingIP)" -eq 12 ] || fail "expected 12 floating IPs at the end"
[ "$(count --kind Node)" -eq 2 ] || fail "expected 2 node addresses at the end"
[ "$(count --kind VPC)" -eq 1 ] || fail "expected 1 uplink at the end"
echo "director scenario: ok ($(count) allocations, check clean)"
