# tritonwatch: `make demo` runs the whole stack locally, `make check` the fast lane, `make test` that and the slow lane.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DURATION ?= 0
BENCH_SECONDS ?= 600
# Debian packages, as PROGRAM:PACKAGE (the program that shows the package is installed). The demo runs
# Prometheus and Alertmanager only; the suite runs them all (tools/need-debs.sh installs what is missing).
DEMO_DEBS := prometheus:prometheus prometheus-alertmanager:prometheus-alertmanager
SUITE_DEBS := $(DEMO_DEBS) promtool:prometheus amtool:prometheus-alertmanager chromium:chromium kubectl:kubectl \
  haproxy:haproxy victoria-metrics:victoria-metrics vmalert:victoria-metrics caddy:caddy
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: venv debs demo-debs stack sloth demo test check lint typecheck pytest generate bench bench-slo clean

# The suite's virtualenv: the package with every extra and the dev group. Each stamp is a file of its own
# (not bin/tritonwatch, which either install writes), so a demo's venv is completed by the first `make check`.
venv: $(VENV)/.installed-all

$(VENV)/.installed-all: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all]' --group dev
	touch $@

# The demo's: the extras it runs (local: the bundled Triton and the load; demo: the live view), or the
# suite's where that is there and current.
$(VENV)/.installed-demo: pyproject.toml
	@if [ ! $(VENV)/.installed-all -nt pyproject.toml ]; then \
	  echo "installing tritonwatch[local,demo] into $(VENV) (about a minute, once)"; \
	  { test -x $(BIN)/python || $(PY) -m venv $(VENV); } && \
	  $(BIN)/pip install -q --upgrade pip && $(BIN)/pip install -q -e '.[local,demo]'; \
	fi
	@touch $@

# Debian packages: Prometheus 2.42, promtool, Alertmanager 0.25, amtool, Chromium (report render test),
# kubectl (kustomize render test), HAProxy 2.6 (a front for the availability-from test), VictoriaMetrics 1.79
# and vmalert (the fleet topology test), Caddy 2.6 (a front for the latency-from test). The suite fails,
# never skips, when one is missing. Not root: each missing one is named with the command to run instead.
debs:
	@tools/need-debs.sh $(SUITE_DEBS)

# The demo's own: Prometheus and Alertmanager.
demo-debs:
	@tools/need-debs.sh $(DEMO_DEBS)

# Today's stack beside Debian's: Prometheus + promtool 3.x, Alertmanager + amtool, VictoriaMetrics + vmalert,
# built from their Go modules once per machine into ~/.cache/tritonwatch/stack (TRITONWATCH_STACK_CACHE);
# a no-op when they are there. Every Prometheus-side test runs on both stacks (tests/support/stacks.py).
# Then a Kubernetes control plane into the same cache (tools/build-kube.sh): kube-apiserver, an etcd
# launcher, the Prometheus Operator, and the operator's and KEDA's CRDs (tests/support/kube.py).
stack:
	tools/build-stack.sh
	tools/build-kube.sh

# Sloth 0.16, the SLO rule generator `make bench-slo` measures tritonwatch's rules beside, built from its Go
# module once per machine into the same cache; a no-op when it is there.
sloth:
	tools/build-sloth.sh

demo: $(VENV)/.installed-demo demo-debs
	$(BIN)/tritonwatch demo $(if $(filter-out 0,$(DURATION)),--duration $(DURATION))

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

# Both lanes in one pytest run.
pytest: venv debs stack
	$(BIN)/pytest -q -ra $(PYTEST_ARGS)

# Lanes (tests/support/lanes.py): a test that starts a real process (Triton, Prometheus, a sidecar, promtool...)
# is slow by construction; the fast lane refuses processes. Exit code 5 (PYTEST_ARGS selected none of a
# lane's tests) is no failure.
# Lint, types and the fast lane, in under 3 minutes.
check: venv debs lint typecheck
	$(BIN)/pytest -q -ra -m "not slow" $(call xdist,$(FAST_WORKERS)) $(PYTEST_ARGS) || [ $$? -eq 5 ]

# The fast lane first (`check`), then only the slow lane: each test runs once. Each lane runs on
# FAST_WORKERS / SLOW_WORKERS pytest-xdist workers, a test file to a worker (its module-scoped servers
# start once; the slow lane's longest files first, tests/support/lanes.py); 0 runs a lane in this process.
# The fast lane computes: one worker a core. The slow lane waits as much as it computes (a stall window,
# a rule's `for`, a scrape): on 2 workers the 2 cores were 45-75 % busy through its long first files.
# Fresh-clone runs, 7 Dec 2026: 21 min 45 s on 2 workers; 13-14 min on 3 after that day's cuts (about
# 8.5 worker-minutes, so about 17.5 min on 2).
# Tests marked `alone` (latency measured against a limit) run last, one at a time with nothing beside
# them: beside another worker's Triton the headroom test's p99 read 504 ms against its 500 ms limit.
FAST_WORKERS ?= 2
SLOW_WORKERS ?= 3
xdist = $(if $(filter-out 0,$(1)),-n $(1) --dist loadfile $(2))
test: check stack
	$(BIN)/pytest -q -ra -m "slow and not alone" $(call xdist,$(SLOW_WORKERS),--no-loadscope-reorder) --durations=30 $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(BIN)/pytest -q -ra -m "slow and alone" --durations=5 $(PYTEST_ARGS) || [ $$? -eq 5 ]

# Regenerate every committed generated file (rules, Alertmanager config, dashboards, Kubernetes manifests, model).
generate: venv
	$(BIN)/tritonwatch rules --slo alerts/slo.yaml --out alerts/generated
	$(BIN)/tritonwatch dashboards --out dashboards/generated
	$(BIN)/tritonwatch k8s --rules alerts/generated --dashboards dashboards/generated --slo alerts/slo.yaml \
	  --out deploy/kubernetes/generated --autoscaling deploy/autoscaling --triton265 deploy/triton265
	$(BIN)/python docs/configdoc.py docs/configuration.md
	$(BIN)/python docs/signals_doc.py > docs/signals.md
	$(BIN)/python model_repository/make_fraud_detector.py
	$(BIN)/python local/replay/make_gpu_replay.py

bench: venv debs
	$(BIN)/python -m bench.run --seconds $(BENCH_SECONDS)

# The SLO rules at fleet scale (docs/slo-cost.md): samples read per evaluation, exactness and page minutes
# beside Sloth's rules on Prometheus 3.16 over 29 backfilled days; generation and promtool tests at fleet size.
# SLO_COST_ARGS="--days 4" / FLEET_GEN_ARGS="--models 100 --test-models 2" for a quick look.
bench-slo: venv stack sloth
	$(BIN)/python -m bench.slo_cost $(SLO_COST_ARGS)
	$(BIN)/python -m bench.fleet_gen $(FLEET_GEN_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
