package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Step is one line of an agent's script. Exactly one of Tool, ListTools,
// SleepMS and WaitNewToken says what the step does.
type Step struct {
	// Tool is the MCP tool to call, with Args as its arguments.
	Tool string         `json:"tool,omitempty"`
	Args map[string]any `json:"args,omitempty"`
	// ExpectError makes a failing call the step's success (a refused
	// delete, a hidden tool) and a succeeding one its failure.
	ExpectError bool `json:"expect_error,omitempty"`
	// ListTools prints the names of the tools the bridge offers.
	ListTools bool `json:"list_tools,omitempty"`
	// SleepMS pauses the script (to let a lease expire).
	SleepMS int `json:"sleep_ms,omitempty"`
	// WaitNewToken pauses the script until $HANDOFF_TOKEN_FILE holds a
	// token the agent has not sent yet: a test puts one there while the
	// agent waits, so the next call is made right after the file changed,
	// not at a time the test guessed (and not with the old token, should
	// the kubelet write that back meanwhile).
	WaitNewToken bool `json:"wait_new_token,omitempty"`
}

// parseScript reads a JSON array of steps, refusing unknown fields (a typo
// in a script should fail the Job, not silently skip a check) and steps
// that say zero or several things to do.
func parseScript(data []byte) ([]Step, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var steps []Step
	if err := dec.Decode(&steps); err != nil {
		return nil, fmt.Errorf("the script is not a JSON array of steps: %w", err)
	}
	if dec.More() {
		return nil, errors.New("the script has data after its array")
	}
	for i, s := range steps {
		if err := s.validate(); err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
	}
	return steps, nil
}

func (s Step) validate() error {
	kinds := 0
	if s.Tool != "" {
		kinds++
	}
	if s.ListTools {
		kinds++
	}
	if s.SleepMS != 0 {
		kinds++
	}
	if s.WaitNewToken {
		kinds++
	}
	switch {
	case kinds != 1:
		return errors.New(`a step is exactly one of {"tool": ...}, {"list_tools": true}, {"sleep_ms": N}, {"wait_new_token": true}`)
	case s.SleepMS < 0:
		return errors.New("sleep_ms is negative")
	case s.Tool == "" && (s.Args != nil || s.ExpectError):
		return errors.New(`"args" and "expect_error" belong to a "tool" step`)
	}
	return nil
}

// digest is how the agent's log names a token: sha256:<hex> of the token
// without surrounding whitespace, never the token itself.
func digest(token string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// verdict says whether a tool step did what the script expects of it: nil
// when it did, else the reason the agent fails.
func verdict(s Step, isError bool, detail string) error {
	switch {
	case s.ExpectError && !isError:
		return fmt.Errorf("%s succeeded but the script expects it to fail", s.Tool)
	case !s.ExpectError && isError:
		return fmt.Errorf("%s failed: %s", s.Tool, oneLine(detail))
	}
	return nil
}

// oneLine shortens a result for an error message.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const most = 300
	if len(s) > most {
		return s[:most] + "..."
	}
	return s
}
