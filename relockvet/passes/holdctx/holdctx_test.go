package holdctx_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/relock-go/relock/relockvet/passes/holdctx"
)

func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), holdctx.Analyzer, "a")
}

func TestTestFilesFlag(t *testing.T) {
	set := func(v string) {
		if err := holdctx.Analyzer.Flags.Set("testfiles", v); err != nil {
			t.Fatal(err)
		}
	}
	set("true")
	defer set("false")
	analysistest.Run(t, analysistest.TestData(), holdctx.Analyzer, "b")
}
