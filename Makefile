# nvtest: every routine task. `make run` and `make test` install what they need first.
VENV ?= .venv
PY := $(VENV)/bin/python
NVTEST := $(VENV)/bin/nvtest
SUITE ?= delivery
PYTEST_ARGS ?=
OUT ?= gpu-evidence

.PHONY: setup run test test-fast lint bench demo-cluster gpu-evidence gpu-evidence-bundle clean

setup:
	bash scripts/setup.sh

## run the delivery suite on this machine as a one-node cluster -> reports/<run-id>/report.html
run: setup
	$(NVTEST) run --suite $(SUITE) --out reports

## install, start what the tests need (they start sshd/Slurm/PostgreSQL fixtures themselves),
## run them; every test server has its own ports and paths, so test files run in parallel
## (one file per xdist worker at a time: a module's cluster is started once)
PYTEST_WORKERS ?= auto
test: setup
	$(PY) -m pytest tests -q -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

## the tests that need no daemons
test-fast: setup
	$(PY) -m pytest tests -q -m "not sshd and not slurm" $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check nvtest suites tests bench
	$(VENV)/bin/ruff format --check nvtest suites tests bench scripts
	$(VENV)/bin/mypy

bench: setup
	@for b in bench/*_bench.py; do echo "== $$b"; $(PY) $$b || exit 1; done

demo-cluster: setup
	$(PY) scripts/demo_cluster.py 4

## on a GPU machine, first: every GPU capture and probe, the delivery and burn-in suites, sanitised,
## into $(OUT)/ (docs/gpu-evidence.md); GPU_EVIDENCE_SHORT=1 for the short form. On a fresh clone it
## installs nvtest from the package index where that answers; no network needed with
## gpu-evidence-bundle/ beside the checkout.
gpu-evidence:
	OUT="$(OUT)" bash scripts/gpu_evidence.sh

## the offline bundle for a GPU machine without network -> gpu-evidence-bundle/ (< 64 MiB)
gpu-evidence-bundle:
	bash scripts/gpu_evidence_bundle.sh

clean:
	rm -rf $(VENV) .venv-stamps .venv-evidence build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
