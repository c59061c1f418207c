// Command target-server runs the reference webhook target (package target):
//
//	SIGNING_SECRET=whsec_… go run ./examples/target/cmd/target-server -addr 127.0.0.1:8787 -ledger ledger.jsonl
//
// -fail makes the next execute requests fail, one fault each, so that you can
// watch signoff reconcile: -fail 500-after-commit,drop-after-commit.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/examples/target"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8787", "where to listen")
	ledger := flag.String("ledger", "", "keep the ledger in this file (one JSON entry a line)")
	fail := flag.String("fail", "", "comma-separated faults for the next execute requests: "+faultNames())
	lookupDown := flag.Int("lookup-down", 0, "answer 503 to this many lookups first")
	lookupRefuse := flag.Int("lookup-refuse", 0, "answer 403 to this many lookups first (the outcome cannot be proven)")
	work := flag.Duration("work", 0, "how long each action takes, like a slow deploy (its lookup says \"in progress\" meanwhile)")
	flag.Parse()

	secret := os.Getenv("SIGNING_SECRET")
	t, err := target.New(strings.Fields(secret), *ledger)
	if err != nil {
		log.Fatalf("target: SIGNING_SECRET: %v", err)
	}
	if *fail != "" {
		for _, f := range strings.Split(*fail, ",") {
			if !slices.Contains(target.Faults, target.Fault(f)) {
				log.Fatalf("target: unknown fault %q (known: %s)", f, faultNames())
			}
			t.Fail(target.Fault(f))
		}
	}
	t.LookupDown(*lookupDown)
	t.SetWork(*work)
	t.LookupRefuses(*lookupRefuse)
	// Listening before saying so: whoever reads the line can connect.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("target: %v", err)
	}
	srv := &http.Server{Handler: t.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "target: listening on http://%s\n", ln.Addr())
	log.Fatal(srv.Serve(ln))
}

func faultNames() string {
	names := make([]string, len(target.Faults))
	for i, f := range target.Faults {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}
