// The e2e node's sandbox (pause) container: a static program with no
// dependencies, built by hack/e2e/build.sh into the e2e cache.
module handoff.dev/hack/e2e/pause

go 1.26.8
