package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A request carries the file's token of that moment, and the identity
// remembers which one it sent.
func TestIdentityReadsTheFileForEveryRequest(t *testing.T) {
	seen := make(chan string, 2)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization") + " " + r.Header.Get("X-Handoff-Profile")
	}))
	defer server.Close()
	file := filepath.Join(t.TempDir(), "token")
	id := &identity{tokenFile: file, profile: "implement", next: http.DefaultTransport}
	client := &http.Client{Transport: id}
	for _, token := range []string{"first\n", "second"} {
		if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		resp, err := client.Get(server.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got, want := id.lastSent(), digest(token); got != want {
			t.Fatalf("lastSent = %s; want %s", got, want)
		}
	}
	for _, want := range []string{"Bearer first implement", "Bearer second implement"} {
		if got := <-seen; got != want {
			t.Fatalf("the server saw %q; want %q", got, want)
		}
	}
}

// A wait ends when the file holds a token no request carried: not on the
// token already sent, written back (as the kubelet may).
func TestWaitForNewEndsOnATokenNotSentYet(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer server.Close()
	file := filepath.Join(t.TempDir(), "token")
	write := func(token string) {
		if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
			t.Error(err)
		}
	}
	write("old")
	id := &identity{tokenFile: file, next: http.DefaultTransport}
	resp, err := (&http.Client{Transport: id}).Get(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	go func() {
		time.Sleep(200 * time.Millisecond)
		write("old\n")
		time.Sleep(200 * time.Millisecond)
		write("new")
	}()
	if err := id.waitForNew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if token, err := id.read(); err != nil || token != "new" {
		t.Fatalf("the wait ended with the file holding %q, %v", token, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	write("old")
	if err := id.waitForNew(ctx); err == nil {
		t.Fatal("a cancelled wait, with only the sent token in the file, ended without an error")
	}
}
