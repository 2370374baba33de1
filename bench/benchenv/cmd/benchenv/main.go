// Command benchenv prints a benchmark's header and footer (package
// bench/benchenv) for the shell scripts that run benchmarks:
//
//	go run ./bench/benchenv/cmd/benchenv begin -state FILE -title TITLE
//	... the benchmark ...
//	go run ./bench/benchenv/cmd/benchenv end -state FILE
//
// begin prints the commit, the machine, the load average and what else
// runs, and keeps what end needs in FILE; end prints the load average at the
// end and what else ran meanwhile.
package main

import (
	"flag"
	"fmt"
	"os"

	"payserver/bench/benchenv"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchenv:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "begin" && args[0] != "end") {
		return fmt.Errorf("usage: benchenv begin -state FILE -title TITLE | end -state FILE")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	state := fs.String("state", "", "file that keeps the run between begin and end")
	title := fs.String("title", "benchmark", "what the benchmark is (begin)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *state == "" {
		return fmt.Errorf("%s: -state is required", args[0])
	}
	if args[0] == "begin" {
		return benchenv.Begin(os.Stdout, *title).Save(*state)
	}
	r, err := benchenv.Load(*state)
	if err != nil {
		return err
	}
	r.End(os.Stdout)
	return nil
}
