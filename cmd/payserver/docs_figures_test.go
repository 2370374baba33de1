package main

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"payserver/internal/repo"
	"payserver/internal/repo/repotest"
)

// TestOperationsFiguresMatchTheBinary: the schema versions docs/OPERATIONS.md
// and api/openapi.yaml show (`behind (0 < N)`, `ahead (N+1 > N)`, `schema at version N`,
// `already at N`, migrations 00001 to 0000N, `applied FILE`) are this
// binary's, and the serving grants it gives are the ones the store suites
// run with (repotest.ServingGrants), as migrate --help says.
func TestOperationsFiguresMatchTheBinary(t *testing.T) {
	b, err := os.ReadFile("../../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b) + string(spec) // the spec's examples show the same figures
	versions, err := repo.EmbeddedVersions(repo.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	newest := slices.Max(versions)
	n := strconv.FormatInt(newest, 10)
	check := func(pattern string, want func(m []string) bool) {
		t.Helper()
		ms := regexp.MustCompile(pattern).FindAllStringSubmatch(doc, -1)
		if len(ms) == 0 {
			t.Errorf("OPERATIONS.md has no %s", pattern)
		}
		for _, m := range ms {
			if !want(m) {
				t.Errorf("OPERATIONS.md says %q; this binary's newest migration is %d", m[0], newest)
			}
		}
	}
	check(`behind \(0 < (\d+)\)`, func(m []string) bool { return m[1] == n })
	check(`ahead \((\d+) > (\d+)\)`, func(m []string) bool { return m[2] == n && m[1] == strconv.FormatInt(newest+1, 10) })
	check(`schema at version (\d+)`, func(m []string) bool { return m[1] == n })
	check(`already at (\d+)`, func(m []string) bool { return m[1] == n })
	check(`00001 to (\d{5})`, func(m []string) bool { v, _ := strconv.ParseInt(m[1], 10, 64); return v == newest })
	check(`applied (\d{5}_\w+\.sql)`, func(m []string) bool {
		_, err := os.Stat("../../migrations/mysql/" + m[1])
		return err == nil
	})

	grant := "GRANT " + repotest.ServingGrants + " ON payserver.* TO 'payserver'@'%';"
	if !strings.Contains(doc, grant) {
		t.Errorf("OPERATIONS.md lacks the servers' grant %q", grant)
	}
	prune := "GRANT DELETE ON payserver." + repotest.PrunedTable + " TO 'payserver'@'%';"
	if !strings.Contains(doc, prune) {
		t.Errorf("OPERATIONS.md lacks the servers' grant %q (pruning the decision log)", prune)
	}
	if want := "DELETE on " + repotest.PrunedTable; !strings.Contains(migrateUsage, want) {
		t.Errorf("migrate --help does not say serving needs %s:\n%s", want, migrateUsage)
	}
	if want := strings.Replace(repotest.ServingGrants, ", UPDATE", " and UPDATE", 1); !strings.Contains(migrateUsage, want) {
		t.Errorf("migrate --help does not say serving needs only %s:\n%s", want, migrateUsage)
	}
}
