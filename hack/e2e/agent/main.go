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
// in place. $HANDOFF_PROFILE, when set, goes in the X-Handoff-Profile
// header. With --stdio it spawns `handoff mcp --stdio ARGS...` (the
// binary of --handoff) and talks to it over its stdin and stdout.
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
	transport, err := newTransport(stdio, handoff, args)
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
	for i, s := range steps {
		if err := runStep(ctx, session, out, i, s); err != nil {
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

// newTransport is the spawned `handoff mcp --stdio` or the bridge's URL.
func newTransport(stdio bool, handoff string, args []string) (mcp.Transport, error) {
	if stdio {
		cmd := exec.Command(handoff, append([]string{"mcp", "--stdio"}, args...)...)
		cmd.Stderr = os.Stderr
		return &mcp.CommandTransport{Command: cmd}, nil
	}
	url := os.Getenv("HANDOFF_MCP_URL")
	tokenFile := os.Getenv("HANDOFF_TOKEN_FILE")
	if url == "" || tokenFile == "" {
		return nil, usageError{errors.New("HANDOFF_MCP_URL and HANDOFF_TOKEN_FILE are required (or --stdio)")}
	}
	if len(args) > 0 {
		return nil, usageError{fmt.Errorf("arguments %q are for --stdio only", args)}
	}
	return &mcp.StreamableClientTransport{
		Endpoint: url,
		HTTPClient: &http.Client{Transport: &identity{
			tokenFile: tokenFile,
			profile:   os.Getenv("HANDOFF_PROFILE"),
			next:      http.DefaultTransport,
		}},
		// Only answers to the agent's own requests matter here.
		DisableStandaloneSSE: true,
	}, nil
}

// identity sets the caller's bearer token, freshly read, and profile on
// every request.
type identity struct {
	tokenFile, profile string
	next               http.RoundTripper
}

func (t *identity) RoundTrip(req *http.Request) (*http.Response, error) {
	token, err := os.ReadFile(t.tokenFile)
	if err != nil {
		return nil, fmt.Errorf("reading the token: %w", err)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	if t.profile != "" {
		req.Header.Set("X-Handoff-Profile", t.profile)
	}
	return t.next.RoundTrip(req)
}

// stepLine is the JSON line printed for a tool step.
type stepLine struct {
	Step    int    `json:"step"`
	Tool    string `json:"tool"`
	IsError bool   `json:"is_error"`
	Result  any    `json:"result"`
}

func runStep(ctx context.Context, session *mcp.ClientSession, out *json.Encoder, i int, s Step) error {
	switch {
	case s.SleepMS > 0:
		select {
		case <-time.After(time.Duration(s.SleepMS) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case s.ListTools:
		tools, err := session.ListTools(ctx, nil)
		if err != nil {
			return fmt.Errorf("listing the tools: %w", err)
		}
		names := make([]string, 0, len(tools.Tools))
		for _, t := range tools.Tools {
			names = append(names, t.Name)
		}
		return out.Encode(map[string]any{"step": i, "tools": names})
	}
	line := stepLine{Step: i, Tool: s.Tool}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: s.Tool, Arguments: s.Args})
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
	if err := out.Encode(line); err != nil {
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
