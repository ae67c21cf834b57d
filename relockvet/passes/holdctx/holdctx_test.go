package holdctx_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/relock-go/relock/relockvet/passes/holdctx"
)

func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), holdctx.Analyzer, "a")
}
