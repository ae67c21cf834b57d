module github.com/relock-go/relock/relockvet

go 1.25.0

require golang.org/x/tools v0.49.0

require (
	golang.org/x/mod v0.40.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
