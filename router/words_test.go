package router

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		in         string
		keepDigits bool
		join       bool
		want       string
	}{
		{"get_stock_price", false, false, "get stock price"},
		{"retrieveBalance", false, false, "retrieve Balance"},
		{"retrieveBalance", false, true, "retrieve Balance retrieveBalance"},
		{"Search Documentation", false, true, "Search Documentation"},
		{"get-weread-rank", false, true, "get weread rank"},
		{"HTTPServerV2", false, false, "HTTP Server V 2"},
		{"HTTPServerV2", true, false, "HTTP Server V2"},
		{"MySQL", false, true, "My SQL MySQL"},
		{"ec2_instance", false, false, "ec 2 instance"},
		{"ec2_instance", true, false, "ec2 instance"},
		{"/root/pdf/wechat_reading_report.pdf", false, false, "root pdf wechat reading report pdf"},
		{"github.create_issue", false, false, "github create issue"},
		{"  spaced   out  ", false, false, "spaced out"},
		{"查询12306中转", false, false, "查询 12306 中转"},
		{"Ünïcode naïveCafé", false, false, "Ünïcode naïve Café"},
		{"", false, false, ""},
		{"--__..", false, false, ""},
	} {
		got := string(splitWords(nil, tc.in, tc.keepDigits, tc.join))
		if got != tc.want {
			t.Errorf("splitWords(%q, keepDigits=%v, join=%v) = %q, want %q", tc.in, tc.keepDigits, tc.join, got, tc.want)
		}
	}
}

func TestDecompound(t *testing.T) {
	v := newVocabulary()
	for _, s := range []string{
		"List the app settings of a config store",
		"Read a config file; app config; event hubs and event grid",
		"Generate a rate table for the gene database. Generate more.",
		"storage sync storage sync key vault key vault hubs",
	} {
		v.add(s, true)
	}
	for _, s := range []string{"appconfig_list", "eventhubs_get", "storagesync", "keyvault", "generate"} {
		v.add(s, false)
	}
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"appconfig", "app config"},
		{"eventhubs", "event hubs"},
		{"storagesync", "storage sync"},
		{"keyvault", "key vault"},
		{"generate", ""},   // a word in its own right: never "gene rate"
		{"app", ""},        // too short
		{"xyzzyplugh", ""}, // unknown parts
		{"Appconfig", ""},  // callers lower-case first
	} {
		if got := strings.Join(v.decompound(tc.in), " "); got != tc.want {
			t.Errorf("decompound(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var nilVoc *vocabulary
	if nilVoc.decompound("appconfig") != nil {
		t.Error("nil vocabulary decompounds")
	}
}

func TestEachRunParts(t *testing.T) {
	var runs []string
	eachRun("fooBar baz_QUXQuux", false, func(run string, parts []string) {
		runs = append(runs, run+"="+strings.Join(slices.Clone(parts), "+"))
	})
	want := []string{"fooBar=foo+Bar", "baz=baz", "QUXQuux=QUX+Quux"}
	if !slices.Equal(runs, want) {
		t.Fatalf("runs %v, want %v", runs, want)
	}
}
