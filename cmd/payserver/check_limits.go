package main

import (
	"fmt"
	"io"
	"os"
	"sort"

	"payserver/internal/configcenter"
	"payserver/internal/ratelimit"
)

// checkLimits validates a limits document offline and prints what payserver
// would enforce. Ops run it before publishing to Nacos. Exit 0 when valid,
// 1 when refused, 2 on usage errors.
func checkLimits(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: payserver check-limits FILE   (FILE - reads standard input)")
		return 2
	}
	var data []byte
	var err error
	if args[0] == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(args[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "check-limits: %v\n", err)
		return 2
	}
	cfg, err := ratelimit.ParseDocument(data)
	if err != nil {
		fmt.Fprintf(stderr, "INVALID: %v\npayserver would refuse this document and keep the limits in force.\n", err)
		return 1
	}
	keys := make([]ratelimit.Key, 0, len(cfg.Rules))
	for k := range cfg.Rules {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	fmt.Fprintf(stdout, "OK: %d keys, default window %s, global shadow %v\n", len(keys), configcenter.FormatWindow(cfg.DefaultWindow), cfg.Shadow)
	for _, k := range keys {
		fmt.Fprintf(stdout, "  %-40s %s\n", k.String(), configcenter.DescribeRule(cfg.Rule(k), true))
	}
	fmt.Fprintln(stdout, "Keys not listed are unlimited.")
	bizTypes := make([]string, 0, len(cfg.Routes))
	for biz := range cfg.Routes {
		bizTypes = append(bizTypes, biz)
	}
	sort.Strings(bizTypes)
	for _, biz := range bizTypes {
		fmt.Fprintf(stdout, "  route %-34s %s\n", biz, configcenter.DescribeRoute(cfg.Routes[biz]))
	}
	if len(bizTypes) > 0 {
		fmt.Fprintln(stdout, "A server refuses routes that name a channel it is not configured with.")
	}
	return 0
}
