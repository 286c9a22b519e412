package secretname

import "testing"

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		name            string
		key, env, valid bool
	}{
		{"GITHUB_TOKEN", true, true, true},
		{"OPENAI_API_KEY", true, true, true},
		{"api-key", true, false, false},
		{"Authorization", true, false, true},
		{"X-Api-Key", true, false, false},
		{"MONKEY", false, false, true},
		{"LOG_LEVEL", false, false, true},
		{"MEMORY_FILE_PATH", false, false, true},
		{"DB_PASSWORD", true, true, true},
		{"1ABC", false, false, false},
		{"", false, false, false},
	} {
		if got := Key(tc.name); got != tc.key {
			t.Errorf("Key(%q) = %v", tc.name, got)
		}
		if got := EnvName(tc.name); got != tc.env {
			t.Errorf("EnvName(%q) = %v", tc.name, got)
		}
		if got := ValidEnvName(tc.name); got != tc.valid {
			t.Errorf("ValidEnvName(%q) = %v", tc.name, got)
		}
	}
}
