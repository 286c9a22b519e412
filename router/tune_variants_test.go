package router_test

import (
	"fmt"

	"github.com/quiver-mcp/quiver/router"
)

// field indexes of router.Config.Boost.
const (
	fName = iota
	fServer
	fDesc
	fParam
	fPDesc
)

// tuneVariants are the configurations of the table in
// benchmarks/README-route.md: two baselines, the measured default, and
// the default with one choice changed at a time.
func tuneVariants() []variant {
	base := router.DefaultConfig()
	var vs []variant
	add := func(name string, f func(c *router.Config)) {
		c := base
		f(&c)
		vs = append(vs, variant{name, c})
	}
	all := func(c *router.Config, an string) {
		for f := range c.Analyzer {
			c.Analyzer[f] = an
		}
	}
	add("A: 1 field srv+name+desc, en", func(c *router.Config) {
		all(c, router.AnEnglish)
		c.Boost = [5]float64{0, 0, 1, 0, 0}
		c.Combined, c.NoSplit, c.JoinRuns, c.Decompound, c.ServerWeight = true, true, false, false, 0
	})
	add("A + split words", func(c *router.Config) {
		all(c, router.AnEnglish)
		c.Boost = [5]float64{0, 0, 1, 0, 0}
		c.Combined, c.JoinRuns, c.Decompound, c.ServerWeight = true, false, false, 0
	})
	add("B: 5 fields =1, en, byField, split", func(c *router.Config) {
		all(c, router.AnEnglish)
		c.Boost = [5]float64{1, 1, 1, 1, 1}
		c.Structure, c.JoinRuns, c.Decompound, c.ServerWeight = router.ByField, false, false, 0
	})
	add("DEFAULT", func(c *router.Config) {})
	add("no word splitting", func(c *router.Config) { c.NoSplit, c.JoinRuns, c.Decompound = true, false, false })
	add("no whole camelCase runs", func(c *router.Config) { c.JoinRuns = false })
	add("no decompounding", func(c *router.Config) { c.Decompound = false })
	add("keep letter+digit runs", func(c *router.Config) { c.KeepDigits = true })
	for _, an := range []string{router.AnEnglish, router.AnSnow, router.AnStem, router.AnStop, router.AnPlain} {
		add("analyzer "+an, func(c *router.Config) { all(c, an) })
	}
	add("structure byField", func(c *router.Config) { c.Structure = router.ByField })
	add("structure flat", func(c *router.Config) { c.Structure = router.Flat })
	for _, b := range []struct {
		f    int
		name string
		vals []float64
	}{
		{fName, "name", []float64{0, 0.5, 2}},
		{fServer, "server", []float64{0, 1, 2}},
		{fDesc, "desc", []float64{0, 0.5, 2}},
		{fParam, "param", []float64{0, 1}},
		{fPDesc, "pdesc", []float64{0, 1}},
	} {
		for _, v := range b.vals {
			add(fmt.Sprintf("boost %s %.1f", b.name, v), func(c *router.Config) { c.Boost[b.f] = v })
		}
	}
	add("server evidence off", func(c *router.Config) { c.ServerWeight = 0 })
	add("server weight 0.5", func(c *router.Config) { c.ServerWeight = 0.5 })
	add("server weight 2", func(c *router.Config) { c.ServerWeight = 2 })
	add("server top 1 (max)", func(c *router.Config) { c.ServerTop = 1 })
	add("server top 5", func(c *router.Config) { c.ServerTop = 5 })
	add("candidates 50", func(c *router.Config) { c.Candidates = 50 })
	add("candidates 200", func(c *router.Config) { c.Candidates = 200 })
	add("+ server/name words in desc", func(c *router.Config) { c.Combined = true })
	add("+ flat idf (boost/idf)", func(c *router.Config) { c.FlatIDF = true })
	add("+ query stop words", func(c *router.Config) { c.QueryStop = true })
	add("+ enum values", func(c *router.Config) { c.Enums = true })
	add("no nested params", func(c *router.Config) { c.Nested = false })
	add("+ abbreviations 4/0.5", func(c *router.Config) { c.Abbrev, c.AbbrevWeight = 4, 0.5 })
	return vs
}
