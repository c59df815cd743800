package main

import (
	"strings"
	"testing"
)

func TestParseScript(t *testing.T) {
	cases := []struct {
		name, script, wantErr string
		steps                 int
	}{
		{"empty", `[]`, "", 0},
		{"one of each", `[{"tool":"get_handoff","args":{"handoff_key":"k"}},{"list_tools":true},{"sleep_ms":5}]`, "", 3},
		{"expected failure", `[{"tool":"delete_handoff","args":{},"expect_error":true}]`, "", 1},
		{"not an array", `{"tool":"x"}`, "not a JSON array", 0},
		{"unknown field", `[{"tool":"x","argz":{}}]`, "unknown field", 0},
		{"nothing to do", `[{}]`, "exactly one of", 0},
		{"two things", `[{"tool":"x","list_tools":true}]`, "exactly one of", 0},
		{"negative sleep", `[{"sleep_ms":-1}]`, "negative", 0},
		{"args without a tool", `[{"list_tools":true,"args":{}}]`, "belong to", 0},
		{"trailing data", `[] []`, "after its array", 0},
		{"a wait for a new token", `[{"wait_new_token":true}]`, "", 1},
		{"a wait and a sleep", `[{"wait_new_token":true,"sleep_ms":5}]`, "exactly one of", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			steps, err := parseScript([]byte(c.script))
			if c.wantErr == "" {
				if err != nil || len(steps) != c.steps {
					t.Fatalf("got %d steps, %v; want %d steps", len(steps), err, c.steps)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got %v; want an error with %q", err, c.wantErr)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	cases := []struct {
		name        string
		expectError bool
		isError     bool
		wantErr     string
	}{
		{"success expected and got", false, false, ""},
		{"failure expected and got", true, true, ""},
		{"failure expected, success got", true, false, "expects it to fail"},
		{"success expected, failure got", false, true, "failed: denied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := verdict(Step{Tool: "delete_handoff", ExpectError: c.expectError}, c.isError, "denied\n")
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v; want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got %v; want an error with %q", err, c.wantErr)
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("a\n  b\tc"); got != "a b c" {
		t.Fatalf("got %q", got)
	}
	if got := oneLine(strings.Repeat("x", 400)); len(got) != 303 || !strings.HasSuffix(got, "...") {
		t.Fatalf("got %d chars", len(got))
	}
}

func TestDigest(t *testing.T) {
	// sha256 of "abc", the FIPS 180-2 example; whitespace around a token is
	// not part of it.
	want := "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	for _, token := range []string{"abc", " abc\n"} {
		if got := digest(token); got != want {
			t.Fatalf("digest(%q) = %s; want %s", token, got, want)
		}
	}
}
