// Command relockvet checks code that uses github.com/relock-go/relock for
// misused hold contexts (see package holdctx).
//
// Standalone:
//
//	go install github.com/relock-go/relock/relockvet/cmd/relockvet@latest
//	relockvet ./...
//
// As a vet tool:
//
//	go vet -vettool=$(which relockvet) ./...
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/relock-go/relock/relockvet/passes/holdctx"
)

func main() { singlechecker.Main(holdctx.Analyzer) }
