// This file reads happy's permission rules: ~/.happy/config.json, then
// <project>/.happy/config.json, each of the shape
//
//	{"permission": [{"permission": "bash", "pattern": "git *", "action": "allow"}, …]}
//
// Rules keep their order (global first, then project, then flags); a later
// matching rule wins (mapper.EvaluateRule, what the runner calls). Unknown
// keys are ignored; a rule with an unknown action, or an empty permission or
// pattern, is an error naming the file and the index: a typo never silently
// becomes "allow".

package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// RulesFileName is the config file name, in the happy home folder and in a
// project's .happy folder.
const RulesFileName = "config.json"

// ErrInvalidRules is wrapped by every refusal of a config file or rule.
var ErrInvalidRules = errors.New("invalid happy config")

// LoadRules reads the global config in homeDir and the project config in
// projectDir/.happy, and returns their rules in order. Missing files are
// fine.
func LoadRules(homeDir, projectDir string) ([]mapper.PermissionRule, error) {
	var rules []mapper.PermissionRule
	for _, p := range []string{filepath.Join(homeDir, RulesFileName), filepath.Join(projectDir, ".happy", RulesFileName)} {
		r, err := loadFile(p)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r...)
	}
	return rules, nil
}

func loadFile(path string) ([]mapper.PermissionRule, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var f struct {
		Permission []struct {
			Permission string `json:"permission"`
			Pattern    string `json:"pattern"`
			Action     string `json:"action"`
		} `json:"permission"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidRules, path, err)
	}
	rules := make([]mapper.PermissionRule, 0, len(f.Permission))
	for i, r := range f.Permission {
		rule, err := makeRule(r.Permission, r.Pattern, r.Action)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: permission[%d]: %v", ErrInvalidRules, path, i, err)
		}
		rules = append(rules, rule)
	}
	return rules, nil
}

func makeRule(permission, pattern, action string) (mapper.PermissionRule, error) {
	a, err := mapper.ParseAction(action)
	if err != nil {
		return mapper.PermissionRule{}, fmt.Errorf("action %q is not allow, deny or ask", action)
	}
	if permission == "" || pattern == "" {
		return mapper.PermissionRule{}, errors.New("permission and pattern must not be empty")
	}
	return mapper.PermissionRule{Permission: permission, Pattern: pattern, Action: a}, nil
}

// ParseRuleFlag parses a rule given on the command line as
// "permission:pattern", for the action of the flag (--allow, --deny, --ask),
// e.g. --allow 'bash:git status*'. The permission of an MCP tool has a
// colon of its own (mcp:<server>/<tool>, docs/ARCHITECTURE.md, section
// "Tools"): the pattern follows the next one, as in 'mcp:github/*:*'.
func ParseRuleFlag(s string, action mapper.Action) (mapper.PermissionRule, error) {
	skip := 0
	if strings.HasPrefix(s, agent.ToolMCPPrefix) {
		skip = len(agent.ToolMCPPrefix)
	}
	perm, pattern, ok := strings.Cut(s[skip:], ":")
	perm = s[:skip] + perm
	if !ok {
		return mapper.PermissionRule{}, fmt.Errorf("%w: rule %q: want permission:pattern", ErrInvalidRules, s)
	}
	r, err := makeRule(perm, pattern, string(action))
	if err != nil {
		return mapper.PermissionRule{}, fmt.Errorf("%w: rule %q: %v", ErrInvalidRules, s, err)
	}
	return r, nil
}
