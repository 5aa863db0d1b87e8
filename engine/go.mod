module github.com/runstwice/runstwice/engine

go 1.26.0

require (
	github.com/aws/aws-lambda-go v1.55.1
	github.com/google/uuid v1.6.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
