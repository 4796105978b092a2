#!/bin/bash
# `ragspine demo` wall time, before / after (first run: cold demo cache) / after (second run: warm), one after
# the other in one run, with no LLM server (the extractive path, as on a machine without Ollama).
#   git archive OLD langchain_ragspine docs/demo | tar -x -C /tmp/prev   # the "before" package
#   benchmarks/demo_time.sh /tmp/prev
set -eu
before=${1:?usage: benchmarks/demo_time.sh BEFORE_SRC}
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python}
export OLLAMA_HOST=http://127.0.0.1:9
cache=$("$py" -c 'from langchain_ragspine.embeddings.e5_onnx import default_cache_dir; print(default_cache_dir())')
rm -f "$cache/demo-embeddings.sqlite"
echo "load: $(uptime)"
for label in before after-cold after-warm; do
  if [ "$label" = before ]; then src=$before; else src=$repo; fi
  s=$(date +%s.%N)
  (cd "$src" && PYTHONPATH="$src" "$py" -m langchain_ragspine demo > "/tmp/ragspine-demo-$label.log" 2>&1)
  e=$(date +%s.%N)
  echo "$label: $(echo "$e - $s" | bc) s; $(grep -m1 'this run' "/tmp/ragspine-demo-$label.log")"
done
echo "load: $(uptime)"
