# runstwice — every command a developer or CI needs. `make test` is what CI
# runs (.ci/run calls it). Tools are installed into the checkout, pinned:
# Python tools into ./.venv (tools/requirements.txt), Go tools into ./bin.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/bin

# The moto server the integration tests start comes from the project's venv.
export RUNSTWICE_MOTO := $(CURDIR)/$(VENV)/bin/moto_server

.PHONY: test fmt-check vet unit integration bench venv clean

## test: everything CI runs (format, vet, unit and integration tests).
test: fmt-check vet integration

## venv: the pinned Python tools (moto server, cfn-lint, SAM CLI) in ./.venv.
venv: $(VENV)/.installed

$(VENV)/.installed: tools/requirements.txt
	@echo "==> installing pinned Python tools into $(VENV) (first run only)"
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements.txt
	touch $@

fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.venv/*' -not -path './.aws-sam/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...

## unit: the unit tests alone (fakes only, no emulator).
unit:
	$(GO) test -count=1 ./...

## integration: unit and integration tests; integration tests start moto.
integration: venv
	$(GO) test -count=1 -race -tags integration ./...

## bench: the benchmarks (runner per-job cost with fakes).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf $(BIN) .devstack .aws-sam
