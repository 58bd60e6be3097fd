#!/usr/bin/env bash
# A director's automation with every feature at once, as a new user writes it: 150 VMs with
# 300 dual-stack NICs in stored subnets of two dual-stack VPCs, each NIC claimed in one
# request (`allocate vpc-X vpc-X-v6 --subnet S --subnet S6`), 12 claims at a time; the
# hosts' own addresses, router uplinks and floating IPs beside them; retries, deletions by
# uid, and `check` clean. Run by tests/director.rs in an empty directory with `ipamctl` on
# PATH; any unexpected exit status or count fails it.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
count() { ipamctl list -A -o name "$@" | wc -l; }
vm_uid() { printf '00000000-0000-4000-8000-%012d' "$1"; }
export -f vm_uid

ipamctl init state >/dev/null && cd state

ipamctl apply -f - >/dev/null <<'YAML'
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: pub-a}
spec: {cidr: 203.0.113.0/26, kind: public, gateway: 203.0.113.1, zone: zone-a}
YAML

# --- Two dual-stack VPCs and their subnets (one per family, gateways stored once) ----------
RED=$(ipamctl vpc create red -n acme/prod --cidr 10.10.0.0/16 --cidr fd00:10::/48)
BLUE=$(ipamctl vpc create blue -n acme/dev --cidr 10.20.0.0/16 --cidr fd00:20::/48)
subnet() { ipamctl subnet create "$1" -n "$2" --pool "$3" --cidr "$4" >/dev/null; }
subnet web acme/prod vpc-red 10.10.1.0/24
subnet web6 acme/prod vpc-red-v6 fd00:10:0:1::/64
subnet db acme/prod vpc-red 10.10.2.0/24
subnet db6 acme/prod vpc-red-v6 fd00:10:0:2::/64
subnet app acme/dev vpc-blue 10.20.1.0/24
subnet app6 acme/dev vpc-blue-v6 fd00:20:0:1::/64

ipamctl allocate pub-a --owner VPC/router --uid "$RED" >/dev/null
ipamctl allocate pub-a --owner VPC/router --uid "$BLUE" >/dev/null

# --- 150 VMs × 2 NICs, each NIC one dual-stack request, 12 at a time -----------------------
# VMs 1-100 in red (NIC 0 in web, NIC 1 in db), 101-150 in blue (both NICs in app).
nic_request() {  # VM NIC: the allocate command line of that NIC, one word per line
    local i=$1 nic=$2
    if (( i <= 100 )); then
        local s=web; (( nic == 1 )) && s=db
        printf '%s\n' vpc-red vpc-red-v6 -n acme/prod --subnet "$s" --subnet "${s}6"
    else
        printf '%s\n' vpc-blue vpc-blue-v6 -n acme/dev --subnet app --subnet app6
    fi
}
export -f nic_request
claim() {  # VM NIC: claims it, printing "OWNER V4 V6" on one line
    local i=$1 nic=$2 out
    mapfile -t req < <(nic_request "$i" "$nic")
    out=$(ipamctl allocate "${req[@]}" --owner "VirtualMachine/vm-$i/$nic" --uid "$(vm_uid "$i")")
    echo "VirtualMachine/vm-$i/$nic" $out
}
export -f claim
for i in $(seq 1 150); do echo "$i 0"; echo "$i 1"; done |
    xargs -P 12 -n 2 bash -c 'claim "$0" "$1"' > claims.txt
[ "$(wc -l < claims.txt)" -eq 300 ] || fail "300 NICs, $(wc -l < claims.txt) claimed"
# Every NIC got one address of each family, inside its subnet, never a gateway or an edge.
while read -r owner v4 v6; do
    case "$v4" in 10.10.1.*|10.10.2.*|10.20.1.*) ;; *) fail "$owner got $v4, outside its subnet";; esac
    case "$v4" in *.0|*.1|*.255) fail "$owner got $v4, a gateway or an edge";; esac
    case "$v6" in fd00:10:0:1::*|fd00:10:0:2::*|fd00:20:0:1::*) ;; *) fail "$owner got $v6, outside its subnet";; esac
    case "$v6" in *::|*::1) fail "$owner got $v6, a gateway or the anycast address";; esac
done < claims.txt
[ "$(cut -d' ' -f2 claims.txt | sort | uniq -d | wc -l)" -eq 0 ] || fail "an IPv4 address given twice"
[ "$(cut -d' ' -f3 claims.txt | sort | uniq -d | wc -l)" -eq 0 ] || fail "an IPv6 address given twice"

# A retried request gets the same two addresses back.
first=$(grep '^VirtualMachine/vm-7/1 ' claims.txt | cut -d' ' -f2-)
again=$(claim 7 1 | cut -d' ' -f2-)
[ "$again" = "$first" ] || fail "a retry got $again, not $first"

# The whole bring-up again as one batch (`allocate -f`, one JSON line per NIC): one process,
# every NIC `existing` with the two addresses it was given above.
for i in $(seq 1 150); do for nic in 0 1; do
    if (( i <= 100 )); then
        s=web; (( nic == 1 )) && s=db; vpc=red; ns=acme/prod
    else
        s=app; vpc=blue; ns=acme/dev
    fi
    printf '{"pools":["vpc-%s","vpc-%s-v6"],"namespace":"%s","subnets":["%s","%s6"],"owner":"VirtualMachine/vm-%d/%d","uid":"%s"}\n' \
        "$vpc" "$vpc" "$ns" "$s" "$s" "$i" "$nic" "$(vm_uid "$i")"
done; done > nics.jsonl
ipamctl allocate -f nics.jsonl -o json > batch.json
python3 - batch.json claims.txt <<'PY' || fail "the batch did not give every NIC its addresses back"
import json, sys
got = {r["owner"]: (r["action"], r["addresses"]) for r in map(json.loads, open(sys.argv[1]))}
want = {o: ("existing", [v4, v6]) for o, v4, v6 in (l.split() for l in open(sys.argv[2]))}
sys.exit(0 if got == want else 1)
PY

# --- The hosts' own addresses on each segment, floating IPs --------------------------------
for s in web db; do
    ipamctl allocate vpc-red vpc-red-v6 -n acme/prod --subnet $s --subnet ${s}6 \
        --owner "Node/$(ipamctl subnet show $s -n acme/prod -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["cidr"])')" >/dev/null
done
ipamctl allocate vpc-blue vpc-blue-v6 -n acme/dev --subnet app --subnet app6 --owner Node/10.20.1.0/24 >/dev/null
for i in $(seq 1 20); do ipamctl allocate --zone zone-a --owner "FloatingIP/fip-$i" >/dev/null; done

# 300 NICs × 2 families, 3 segments × 2, 2 uplinks, 20 floating IPs.
[ "$(count)" -eq 628 ] || fail "expected 628 allocations, found $(count)"
ipamctl check >/dev/null 2>&1 || { ipamctl check; fail "check after the claims"; }

# --- Ten VMs deleted: every address they held, both families, by uid ----------------------
for i in $(seq 91 100); do printf '{"uid":"%s"}\n' "$(vm_uid "$i")"; done |
    ipamctl release -f - -o json > released.json   # one batch, each request a `release --uid`
[ "$(grep -c '"released"' released.json)" -eq 10 ] || fail "ten VMs' releases, $(grep -c '"released"' released.json) done"
[ "$(count)" -eq 588 ] || fail "expected 588 allocations after the deletions, found $(count)"
# A retry of a teardown that already happened needs --ignore-not-found.
ipamctl release --uid "$(vm_uid 91)" -A 2>/dev/null && fail "a release matching nothing exited 0"
ipamctl release --uid "$(vm_uid 91)" -A --ignore-not-found 2>/dev/null
ipamctl check >/dev/null 2>&1 || { ipamctl check; fail "check after the deletions"; }

echo "director dual-stack scenario: ok ($(count) allocations, check clean)"
