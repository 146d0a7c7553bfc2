#!/bin/sh
# layer_check.sh: the library's floors, checked. Every #include of a file under src/ and every call from
# one object file of the library into another must point down the layer order below (or stay on its
# floor); the order is written here once. docs/architecture.md explains what lives on each floor.
#
#   sh tests/layer_check.sh SRC_DIR [OBJECT_DIR]
#
# SRC_DIR is the project's src/. OBJECT_DIR (optional) is where the build put the library's object files
# (build/CMakeFiles/ampc_objects.dir/src): with it, calls are checked too, from the symbols each object
# defines and uses (nm), so a call through the public header (ampc.h declares everything) cannot hide an
# upward dependency. Prints the layer graph of includes (and calls), every upward edge with the file and
# the name it reaches, and exits 1 when there is one.
#
# With OBJECT_DIR it also checks the order of the files within the kernels floor (KERNEL_RANKS): the
# registry at the bottom, the measurement on it, dispatch on both, the users of the resolved tables on
# top, and the devices' operations (kernels/cpu/, device_ops.c) above them all; a file may call files of
# its own rank or below. The ISA folders (kernels/ref, avx2, avx512, amx: kernels and their tables) rank
# below the registry. A file of src/kernels/ itself that has no rank here
# fails the check, so a new file takes its place in the order.
set -eu
. "$(dirname "$0")/test_lib.sh" # test_tmpdir

LAYERS="core numerics kernels tensor autograd amp ops optim nn data io dist ctx"
KERNEL_RANKS="registry.c:1 tune.c:2 tune_work.c:2 tune_cache.c:2 dispatch.c:3 choices.c:4 kernel_info.c:4
fp32_precision.c:4 convert.c:4 cpu/:5 device_ops.c:5 profile.c:5"

src=${1:?usage: layer_check.sh SRC_DIR [OBJECT_DIR]}
obj=${2:-}
test_tmpdir layer_check
tmp=$TEST_TMP

# The floor of a path relative to src/: its first folder, or "ctx" for the assembly files at the top.
floor_of() {
    case "$1" in
    */*) echo "${1%%/*}" ;;
    *) echo ctx ;;
    esac
}

# ---- includes: "FROM_FLOOR TO_FLOOR FILE HEADER" per line ----
cd "$src"
find . -name '*.[ch]' | sed 's|^\./||' | sort | while read -r f; do
    dir=$(dirname "$f")
    grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed -E 's/.*"([^"]+)".*/\1/' | while read -r inc; do
        case "$inc" in ampc.h) continue ;; esac
        # resolve ../ against the including file's folder
        path=$(printf '%s/%s\n' "$dir" "$inc" | awk -F/ '{
            n = 0
            for (i = 1; i <= NF; i++) {
                if ($i == "." || $i == "") continue
                if ($i == "..") { if (n > 0) n--; continue }
                p[++n] = $i
            }
            s = p[1]; for (i = 2; i <= n; i++) s = s "/" p[i]; print s }')
        if [ ! -f "$path" ]; then
            echo "layer_check: $f includes \"$inc\", which is not a file under src/" >&2
            echo "MISSING $f $inc" >>"$tmp/missing"
            continue
        fi
        echo "$(floor_of "$f") $(floor_of "$path") $f $path"
    done
done >"$tmp/includes"
cd - >/dev/null

# ---- calls: "FROM_FLOOR TO_FLOOR OBJECT SYMBOL DEFINING_OBJECT" per line ----
if [ -n "$obj" ]; then
    # objects of sources that still exist (a build folder keeps the objects of moved files)
    (cd "$obj" && find . -name '*.c.o' | sed 's|^\./||' | sort) | while read -r o; do
        if [ -f "$src/${o%.o}" ]; then echo "$o"; fi
    done >"$tmp/objects"
    if [ ! -s "$tmp/objects" ]; then
        echo "layer_check: no object files of src/ under $obj (build the library first)" >&2
        exit 2
    fi
    while read -r o; do
        nm --defined-only -g "$obj/$o" | awk -v o="$o" 'NF == 3 { print $3, o }'
    done <"$tmp/objects" | sort >"$tmp/defs"
    while read -r o; do
        nm -u "$obj/$o" | awk -v o="$o" '{ print $NF, o }'
    done <"$tmp/objects" | sort >"$tmp/uses"
    # join on the symbol: SYMBOL USER DEFINER
    join "$tmp/uses" "$tmp/defs" | while read -r sym user def; do
        u=${user%.c.o}
        d=${def%.c.o}
        echo "$(floor_of "$u") $(floor_of "$d") $u.c $sym $d.c"
    done >"$tmp/calls"
fi

# ---- report ----
rank_awk='BEGIN { n = split(layers, L, " "); for (i = 1; i <= n; i++) R[L[i]] = i }'
report() {   # $1: file of edges, $2: what they are
    awk -v layers="$LAYERS" -v what="$2" "$rank_awk"'
        { if (!($1 in R) || !($2 in R)) { print "layer_check: unknown floor in: " $0 > "/dev/stderr"; bad = 1; next }
          if ($1 != $2) e[$1 " -> " $2]++ }
        END {
            printf "%s between floors (FROM -> TO: count; ^ marks an upward edge):\n", what
            for (i = 1; i <= n; i++) for (j = 1; j <= n; j++) {
                k = L[i] " -> " L[j]
                if (k in e) printf "  %-22s %5d%s\n", k, e[k], (j > i ? "  ^" : "")
            }
            exit bad
        }' "$1"
}
upward() {   # the upward edges themselves
    awk -v layers="$LAYERS" "$rank_awk"'R[$2] > R[$1]' "$1"
}

report "$tmp/includes" "#include edges"
up_inc=$(upward "$tmp/includes" | tee "$tmp/up_inc" | wc -l)
up_call=0
if [ -n "$obj" ]; then
    report "$tmp/calls" "call edges"
    up_call=$(upward "$tmp/calls" | tee "$tmp/up_call" | wc -l)
fi
if [ "$up_inc" -gt 0 ]; then
    echo "upward includes:"
    awk '{ printf "  %s (%s) includes %s (%s)\n", $3, $1, $4, $2 }' "$tmp/up_inc"
fi
if [ "$up_call" -gt 0 ]; then
    echo "upward calls:"
    awk '{ printf "  %s (%s) calls %s of %s (%s)\n", $3, $1, $4, $5, $2 }' "$tmp/up_call"
fi

# ---- within the kernels floor: "FROM_RANK TO_RANK FROM TO SYMBOL" per call between two of its files ----
up_kern=0
if [ -n "$obj" ]; then
    awk -v ranks="$KERNEL_RANKS" '
        BEGIN { n = split(ranks, P, /[ \n]+/); for (i = 1; i <= n; i++) { split(P[i], f, ":"); R[f[1]] = f[2] } }
        function rank(path) {   # path relative to src/kernels/; -1: none
            if (path ~ /^cpu\//) return R["cpu/"]   # the CPU device operations, above the tables they run
            if (path ~ /\//) return 0
            if (path in R) return R[path]
            if (!(path in said)) print "layer_check: src/kernels/" path " has no rank in KERNEL_RANKS" > "/dev/stderr"
            said[path] = bad = 1
            return -1
        }
        FNR == NR { if ($0 ~ /^kernels\/[^\/]*$/) rank(substr($0, 9, length($0) - 10)); next }   # every object
        $1 == "kernels" && $2 == "kernels" {
            u = substr($3, 9); d = substr($5, 9); ru = rank(u); rd = rank(d)
            if (ru >= 0 && rd >= 0) print ru, rd, u, d, $4
        }
        END { exit bad }' "$tmp/objects" "$tmp/calls" >"$tmp/kcalls" || touch "$tmp/unranked"
    echo "calls within the kernels floor (FROM -> TO: count; ISA folders as <isa>/; ^ marks an upward call):"
    awk '{ u = $3; d = $4; sub(/\/.*/, "/", u); sub(/\/.*/, "/", d)
           if (u != d) { k = u " -> " d; e[k]++; up[k] = up[k] || $2 > $1 } }
         END { for (k in e) printf "  %-36s %5d%s\n", k, e[k], (up[k] ? "  ^" : "") }' "$tmp/kcalls" | sort
    up_kern=$(awk '$2 > $1' "$tmp/kcalls" | tee "$tmp/up_kern" | wc -l)
    if [ "$up_kern" -gt 0 ]; then
        echo "upward calls within the kernels floor:"
        awk '{ printf "  kernels/%s (rank %d) calls %s of kernels/%s (rank %d)\n", $3, $1, $5, $4, $2 }' "$tmp/up_kern"
    fi
fi

# ---- run-time upward edges: a lower floor's event whose listener a higher floor subscribes ----
# (allowed: the lower floor owns the list and knows only the listener's type; printed so a reader sees them)
# EVENT_FLOORS: the subscribing call and the floor that owns (fires) the event.
EVENT_FLOORS="ampci_autograd_on_grad_seen:autograd ampci_autograd_on_grad_ready:autograd
ampci_tensor_on_absent:tensor ampci_tensor_on_free:tensor ampci_optim_set_dist:optim ampci_fp8_on_amax:amp"
echo "run-time upward edges (listeners: SUBSCRIBER -> FIRING FLOOR: event, file):"
for ev in $EVENT_FLOORS; do
    call=${ev%%:*}
    (cd "$src" && grep -l "$call(" -- */*.c 2>/dev/null) | while read -r f; do
        [ "$(floor_of "$f")" = "${ev#*:}" ] && continue # the owner's own definition
        printf '  %-8s -> %-8s %s, %s\n' "$(floor_of "$f")" "${ev#*:}" "${call#ampci_}" "$f"
    done
done | sort -u

# ---- the device seam: above the kernels floor nothing runs the CPU's kernel table or splits element work
# itself (that is a device operation's job, src/kernels/device.h); the guard device catches reads and writes
# of tensor memory at run time, this catches the CPU-only shortcuts that would work on it ----
SEAM_PATTERNS='->kernels|ampci_convert_with\(|ampci_gemm_fn\(|ampci_parallel_rows\(|ampc_k_[a-z0-9_]+__'
# (ctx.c, the context assembly, installs the table: it is the one file allowed to name it)
(cd "$src" && grep -nE -e "$SEAM_PATTERNS" -- tensor/*.c autograd/*.c amp/*.c ops/*.c optim/*.c nn/*.c data/*.c \
    io/*.c dist/*.c deprecated.c 2>/dev/null) >"$tmp/seam" || true
seam=$(wc -l <"$tmp/seam" | tr -d ' ')
if [ "$seam" -gt 0 ]; then
    echo "the device seam is bypassed above the kernels floor (use a device operation, src/kernels/device.h):"
    sed 's/^/  /' "$tmp/seam"
fi

files=$(awk '{ print $3 }' "$tmp/up_inc" "$tmp/up_call" 2>/dev/null | sort -u | wc -l)
echo "floors: $LAYERS"
echo "device seam bypasses above the kernels floor: $seam"
echo "upward edges: $up_inc includes, $up_call calls, in $files files"
if [ -n "$obj" ]; then
    echo "kernels floor order (rank: files): $(printf '%s\n' $KERNEL_RANKS | awk -F: '
        { f[$2] = f[$2] (f[$2] == "" ? "" : ",") $1; if ($2 > m) m = $2 }
        END { s = "0: ref/,avx2/,avx512/,amx/"; for (r = 1; r <= m; r++) s = s " < " r ": " f[r]; print s }')"
    echo "upward calls within the kernels floor: $up_kern"
fi
[ ! -f "$tmp/missing" ] && [ ! -f "$tmp/unranked" ] &&
    [ "$up_inc" -eq 0 ] && [ "$up_call" -eq 0 ] && [ "$up_kern" -eq 0 ] && [ "$seam" -eq 0 ]
