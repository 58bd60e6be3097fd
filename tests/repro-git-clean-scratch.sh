#!/bin/bash
# Deterministic reproduction of the rare failure of
# git_clean_never_deletes_a_printed_claim_in_a_new_allocations_directory
# (a claim printed by `allocate`, then deleted by `git clean -qfdX`).
#
# 1. ipamctl's mkdirat of the scratch dir `.index` is held 1 s; a `git clean -qfdX` removes
#    the (empty, ignored) `.index/` meanwhile, so the openat after the mkdirat fails ENOENT.
#    Before the fix, `scratch()` then returned None and the temporary file was made beside
#    the target, in the new `ipallocations/`.
# 2. The rename is held 2 s; a second `git clean -qfdX` scans `ipallocations/` (only an
#    ignored `.tmp-*` in it: the directory is removed whole) and its removal pass (readdir) is
#    held 3 s, until after the rename: it reads the claim's name and unlinks it.
# usage: repro-git-clean-scratch.sh path/to/ipamctl   (prints OK or LOST)
BIN=$(realpath "$1"); T=$(mktemp -d); R=$T/s
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
"$BIN" init "$R" >/dev/null
printf 'apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: p\n  namespace: ns0\nspec:\n  cidr: 10.1.0.0/24\n  kind: private\n' | "$BIN" -d "$R" apply -f - >/dev/null
cd "$R"
git init -q; git add -A; git -c user.email=a@b -c user.name=a commit -qm pools; git clean -qfdX
strace -f -tt -o $T/ipam.trace -e trace=mkdirat,openat,renameat2,unlinkat,fsync \
  -e inject=mkdirat:delay_exit=1000000:when=2 -e inject=renameat2:delay_enter=2000000:when=1 \
  "$BIN" -d "$R" -n ns0 allocate p --owner FloatingIP/x > $T/printed 2>$T/err &
sleep 0.5
git clean -qfdX
sleep 1.0
strace -f -tt -o $T/git2.trace -P namespaces/ns0/ipallocations -e trace=openat,getdents64,newfstatat,unlink,rmdir \
  -e inject=getdents64:delay_enter=3000000:when=3 git clean -qfdX 2>/dev/null
wait
echo "allocate printed: '$(cat $T/printed)' stderr: '$(cat $T/err)' (traces in $T)"
[ -s $T/printed ] || { echo "NOTHING PRINTED (nothing lost)"; exit 0; }
F=namespaces/ns0/ipallocations/p-$(tr . - < $T/printed | tr -d '\n').yaml
if [ -e "$F" ]; then echo "OK: $F exists"; else echo "LOST: $F"; exit 1; fi
