// Command agent is the e2e node's scripted agent: a real MCP client, built
// on the official Go SDK, that plays an agent Job's part against the bridge
// without a model. It makes the tool calls of a JSON script and prints each
// result as one JSON line, so a test reads the Job's log to see what the
// agent saw (`kubectl logs`), and the Job's status to see whether every step
// did what the script expects.
//
// Over streamable HTTP (the default) it reaches $HANDOFF_MCP_URL as the
// Pod's ServiceAccount: the bearer token is read from $HANDOFF_TOKEN_FILE
// again for every request, because the kubelet rotates a projected token
// in place, and each tool step's line names the token its call carried
// by digest ("token": "sha256:<hex>"). $HANDOFF_PROFILE, when set, goes
// in the X-Handoff-Profile header. With --stdio it spawns `handoff mcp
// --stdio ARGS...` (the binary of --handoff) and talks to it over its
// stdin and stdout.
//
// The script is $E2E_SCRIPT, or the file of --script: a JSON array of
// steps (see Step). $HANDOFF_GOAL, when set, is printed first as
// {"goal": "..."}, as the wrapper hands a goal to a real agent.
//
// Exit status: 0 when every step did what it should, 1 otherwise (with the
// reason on stderr), 2 for a bad command line.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	stdio := flag.Bool("stdio", false, "spawn `handoff mcp --stdio ARGS...` instead of connecting to $HANDOFF_MCP_URL")
	handoff := flag.String("handoff", "/handoff", "the handoff binary of --stdio")
	scriptFile := flag.String("script", "", "the script's file (default: the script in $E2E_SCRIPT)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, *stdio, *handoff, *scriptFile, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		var usage usageError
		if errors.As(err, &usage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a mistake in how the agent was started.
type usageError struct{ error }

func run(ctx context.Context, stdio bool, handoff, scriptFile string, args []string) error {
	steps, err := loadScript(scriptFile)
	if err != nil {
		return err
	}
	transport, id, err := newTransport(stdio, handoff, args)
	if err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	if goal := os.Getenv("HANDOFF_GOAL"); goal != "" {
		if err := out.Encode(map[string]string{"goal": goal}); err != nil {
			return err
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "handoff-e2e-agent", Version: "0.1.0"}, nil)
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return fmt.Errorf("connecting to the bridge: %w", err)
	}
	defer session.Close()
	a := agent{session: session, out: out, id: id}
	for i, s := range steps {
		if err := a.runStep(ctx, i, s); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	return nil
}

// loadScript reads the script from FILE, else from $E2E_SCRIPT.
func loadScript(file string) ([]Step, error) {
	var data []byte
	switch {
	case file != "":
		read, err := os.ReadFile(file)
		if err != nil {
			return nil, usageError{err}
		}
		data = read
	case os.Getenv("E2E_SCRIPT") != "":
		data = []byte(os.Getenv("E2E_SCRIPT"))
	default:
		return nil, usageError{errors.New("no script: set E2E_SCRIPT or pass --script FILE")}
	}
	steps, err := parseScript(data)
	if err != nil {
		return nil, usageError{err}
	}
	return steps, nil
}

// newTransport is the spawned `handoff mcp --stdio` or the bridge's URL,
// with the identity that signs the URL's requests (nil over stdio).
func newTransport(stdio bool, handoff string, args []string) (mcp.Transport, *identity, error) {
	if stdio {
		cmd := exec.Command(handoff, append([]string{"mcp", "--stdio"}, args...)...)
		cmd.Stderr = os.Stderr
		return &mcp.CommandTransport{Command: cmd}, nil, nil
	}
	url := os.Getenv("HANDOFF_MCP_URL")
	tokenFile := os.Getenv("HANDOFF_TOKEN_FILE")
	if url == "" || tokenFile == "" {
		return nil, nil, usageError{errors.New("HANDOFF_MCP_URL and HANDOFF_TOKEN_FILE are required (or --stdio)")}
	}
	if len(args) > 0 {
		return nil, nil, usageError{fmt.Errorf("arguments %q are for --stdio only", args)}
	}
	id := &identity{
		tokenFile: tokenFile,
		profile:   os.Getenv("HANDOFF_PROFILE"),
		next:      http.DefaultTransport,
	}
	return &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: id},
		// Only answers to the agent's own requests matter here.
		DisableStandaloneSSE: true,
	}, id, nil
}

// identity sets the caller's bearer token, freshly read, and profile on
// every request, and remembers the digests of the tokens it sent.
type identity struct {
	tokenFile, profile string
	next               http.RoundTripper

	mu   sync.Mutex
	last string
	// sent holds one entry per distinct token: a handful in a Job's life.
	sent map[string]bool
}

func (t *identity) RoundTrip(req *http.Request) (*http.Response, error) {
	token, err := t.read()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.last = digest(token)
	if t.sent == nil {
		t.sent = map[string]bool{}
	}
	t.sent[t.last] = true
	t.mu.Unlock()
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+token)
	if t.profile != "" {
		req.Header.Set("X-Handoff-Profile", t.profile)
	}
	return t.next.RoundTrip(req)
}

// read is the token the file holds now, trimmed.
func (t *identity) read() (string, error) {
	token, err := os.ReadFile(t.tokenFile)
	if err != nil {
		return "", fmt.Errorf("reading the token: %w", err)
	}
	return strings.TrimSpace(string(token)), nil
}

// lastSent is the digest of the token of the latest request.
func (t *identity) lastSent() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// wasSent says whether a request carried the token of digest d.
func (t *identity) wasSent(d string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent[d]
}

// waitForNew polls the token file until it holds a token not sent yet.
func (t *identity) waitForNew(ctx context.Context) error {
	deadline := time.After(tokenWait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		token, err := t.read()
		if err == nil && token != "" && !t.wasSent(digest(token)) {
			return nil
		}
		select {
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("the token file held no new token within %s", tokenWait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tokenWait bounds a wait_new_token step.
const tokenWait = 2 * time.Minute

// agent runs a script's steps on one session.
type agent struct {
	session *mcp.ClientSession
	out     *json.Encoder
	id      *identity
}

// stepLine is the JSON line printed for a tool step.
type stepLine struct {
	Step    int    `json:"step"`
	Tool    string `json:"tool"`
	IsError bool   `json:"is_error"`
	Result  any    `json:"result"`
	// Token is the digest of the bearer token of the call (over HTTP).
	Token string `json:"token,omitempty"`
}

func (a agent) runStep(ctx context.Context, i int, s Step) error {
	switch {
	case s.SleepMS > 0:
		select {
		case <-time.After(time.Duration(s.SleepMS) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case s.WaitNewToken:
		if a.id == nil {
			return errors.New("wait_new_token needs a token file (not --stdio)")
		}
		return a.id.waitForNew(ctx)
	case s.ListTools:
		tools, err := a.session.ListTools(ctx, nil)
		if err != nil {
			return fmt.Errorf("listing the tools: %w", err)
		}
		names := make([]string, 0, len(tools.Tools))
		for _, t := range tools.Tools {
			names = append(names, t.Name)
		}
		return a.out.Encode(map[string]any{"step": i, "tools": names})
	}
	line := stepLine{Step: i, Tool: s.Tool}
	res, err := a.session.CallTool(ctx, &mcp.CallToolParams{Name: s.Tool, Arguments: s.Args})
	if a.id != nil {
		line.Token = a.id.lastSent()
	}
	var detail string
	switch {
	case err != nil:
		// A JSON-RPC error (an unknown or hidden tool) fails the step too.
		line.IsError, line.Result, detail = true, err.Error(), err.Error()
	default:
		line.IsError = res.IsError
		detail = text(res)
		line.Result = res.StructuredContent
		if line.Result == nil {
			line.Result = detail
		}
	}
	if err := a.out.Encode(line); err != nil {
		return err
	}
	return verdict(s, line.IsError, detail)
}

// text joins the text contents of a result.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}
