//! `aggregate profile`: the shipped profiles, and what a profile needs run to be judged.

use super::*;
use verdict::profile;

/// Delivery profiles: the shipped ones, and what a profile needs run to be judged.
#[derive(Args)]
pub struct ProfileArgs {
    #[command(subcommand)]
    cmd: ProfileCmd,
}

impl ProfileArgs {
    pub fn run(self) -> Result<u8> {
        let Self { cmd } = self;
        match cmd {
            ProfileCmd::List => {
                for (name, _) in profile::BUILTIN {
                    let p = profile::load(name)?;
                    println!("{name:<24} {}", terminal(&p.description));
                }
            }
            ProfileCmd::Explain { profile } => {
                print!("{}", terminal(&explain::explain(&profile::load(&profile)?)));
            }
        }
        Ok(exit::OK)
    }
}

#[derive(Subcommand)]
pub enum ProfileCmd {
    /// List the shipped profiles.
    List,
    /// Every check of a profile with the run of the suite that feeds it, by stage, and
    /// the distinct runs once each: what an acceptance run must do for every check to be
    /// judged.
    Explain {
        /// A TOML file, or a shipped profile by name.
        profile: String,
    },
}
