# torch_pythons.sh: sourced by the benchmark scripts that run PyTorch beside ampc (they set AMPC and HERE).
# find_torch_pythons LIST sets $pythons to the interpreters of LIST that can import torch, printing each
# one's version, and says so for the others (a benchmark then times ampc alone); run_pair times one step both ways.
find_torch_pythons() {
    pythons=""
    for py in $1; do
        if v=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null); then
            pythons="$pythons $py"
            echo "PyTorch $v: $py"
        else
            echo "skipped $py: cannot import torch"
        fi
    done
    [ -n "$pythons" ] || echo "no PyTorch found: timing ampc alone"
}

# run_pair OUT MODEL DATA PREC BATCH THREADS STEPS: one `ampc bench step` (JSON tagged "impl":"ampc") then
# pytorch_step.py under each of $pythons, the same step, appended to OUT; a run that fails leaves a line
# saying so ("error":"crashed" for PyTorch, which refuses some precisions on some versions).
run_pair() {
    out=$1 model=$2 data=$3 prec=$4 b=$5 t=$6 steps=$7
    "$AMPC" bench step --model "$model" --data "$data" --batch "$b" --precisions "$prec" --steps "$steps" \
        --threads "$t" --json | sed 's/^{/{"impl":"ampc",/' >>"$out" ||
        echo "ampc bench step failed: $model batch $b $prec, $t threads" >&2
    for py in $pythons; do
        OMP_NUM_THREADS=$t "$py" "$HERE/pytorch_step.py" --model "$model" --precision "$prec" --batch "$b" \
            --steps "$steps" --threads "$t" >>"$out" 2>/dev/null ||
            echo "{\"impl\":\"$py\",\"model\":\"$model\",\"batch\":$b,\"precision\":\"$prec\",\"threads\":$t,\"error\":\"crashed\"}" >>"$out"
    done
}
